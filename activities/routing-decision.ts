import type { Sql } from '../db/connect';
import { HEALTH_DEFAULTS, readEstimates, recordOutcome, takeCall, takeProbe, type CallLimit, type CallPermit, type Estimates, type HealthSettings, type RecordedOutcome } from '../db/routing';
import { findTenantRouting } from '../db/tenants';
import { feesFor, type FeeSchedule } from '../domain/routing-fees';
import { routeCandidates, Routing, splitDraw } from '../domain/routing';
import { decideSuccessRate, meanOf, posteriorOf, SUCCESS_RATE_DEFAULTS, type NetObjective } from '../domain/routing-success-rate';
import type { DecidedRoute, DecideRouteInput, RouteDecisionRecord, RouteOutcomeInput } from '../shared/routing';

/**
 * Routing's decision and its outcomes as activities (docs/routing-and-waits.md, "Success-rate
 * routing"): the workflow calls decideRoute once per payment and records its answer in the
 * history (never decided again on replay), then recordRouteOutcome for each first attempt at a
 * PSP. Both read and write the shared state of db/routing.ts, so every worker decides from what
 * all of them saw.
 */
export interface RouteDecisionDeps {
  sql: Sql;
  /** The configured PSPs' names, in PROVIDERS order. */
  providerNames: readonly string[];
  /** The deployment's fee schedule (PROVIDER_FEES); null: none. */
  fees?: FeeSchedule | null;
  /** Each PSP's calls per second across the fleet (PROVIDER_RATE_LIMITS); a PSP not named has none. */
  callLimits?: Readonly<Record<string, CallLimit>> | null;
  health?: HealthSettings;
}

/** The tenant's routing as stored (validated when set); unreadable: none. */
async function tenantRouting(sql: Sql, tenantId: string): Promise<Routing | null> {
  const stored = await findTenantRouting(sql, tenantId);
  const parsed = stored === null ? null : Routing.safeParse(stored);
  return parsed?.success ? parsed.data : null;
}

/**
 * Which candidates are out of first place for this payment, and which one it probes: an open
 * PSP (its errors), one whose approvals fell at a level of the segment, and a half-open one
 * whose probe another payment holds are out; the first half-open one whose probe this payment
 * takes (db/routing.ts takeProbe) is its probe, which it tries first. In a static order a
 * half-open PSP behind one that is in takes no probe (the payment would not try it first).
 */
async function standings(sql: Sql, candidates: readonly string[], estimates: Estimates, health: HealthSettings, ordered: boolean): Promise<{ eliminated: Record<string, string>; probe?: string }> {
  const eliminated: Record<string, string> = {};
  let probe: string | undefined;
  let anyIn = false;
  for (const provider of candidates) {
    const standing = estimates.health[provider];
    if (standing?.state === 'open') eliminated[provider] = `its errors (${standing.reason ?? 'shared health'})`;
    else if (standing?.state === 'half_open') {
      if (probe === undefined && !(ordered && anyIn) && (await takeProbe(sql, provider, health))) probe = provider;
      else eliminated[provider] = 'half-open: its probe is another payment\'s';
    } else if (estimates.fell[provider] !== undefined) eliminated[provider] = `its approvals fell at ${estimates.fell[provider]}`;
    if (eliminated[provider] === undefined) anyIn = true;
  }
  return probe === undefined ? { eliminated } : { eliminated, probe };
}

/** The static order with the eliminated PSPs moved last (never dropped; all eliminated: the order stands), as a record. */
function staticDecision(candidates: readonly string[], reason: string, estimates: Estimates, eliminated: Record<string, string>, segment: DecideRouteInput['segment']): { record: RouteDecisionRecord; providers: string[] } {
  const out = candidates.filter((p) => eliminated[p] !== undefined);
  const providers = out.length === candidates.length ? [...candidates] : [...candidates.filter((p) => eliminated[p] === undefined), ...out];
  const moved = out.length && out.length < candidates.length ? `; ${out.map((p) => `${p} moved last: ${eliminated[p]}`).join('; ')}` : '';
  return {
    providers,
    record: {
      strategy: 'static',
      candidates: candidates.map((provider) => ({
        provider,
        approval_estimate: meanOf(posteriorOf(estimates.counts[provider], segment, SUCCESS_RATE_DEFAULTS)),
        selection_probability: provider === providers[0] ? 1 : 0,
      })),
      chosen: providers[0]!,
      explored: false,
      reason: `${reason}${moved}`,
    },
  };
}

export function createRouteDecisionSteps(deps: RouteDecisionDeps) {
  const health = deps.health ?? HEALTH_DEFAULTS;
  return {
    /**
     * Decides a payment's route: the candidates of its tenant's routing (domain/routing.ts
     * routeCandidates), ordered by the strategy (static: as listed; success_rate: the decision
     * of domain/routing-success-rate.ts over the shared counts, its uniform number a hash of the
     * payment id), PSPs out of first place by the shared health moved last under every strategy.
     */
    async decideRoute(input: DecideRouteInput): Promise<DecidedRoute> {
      const routing = await tenantRouting(deps.sql, input.tenantId);
      const planned = routeCandidates(routing, input, deps.providerNames);
      const candidates = planned.providers;
      const tenantScope = routing?.scope === 'tenant' ? input.tenantId : null;
      const estimates = await readEstimates(deps.sql, { scope: tenantScope ?? '', providers: candidates, segment: input.segment, health });
      const learnt = routing?.strategy === 'success_rate';
      const { eliminated, probe } = await standings(deps.sql, candidates, estimates, health, !learnt);
      const codes = planned.retryableDeclineCodes ? { retryableDeclineCodes: planned.retryableDeclineCodes } : {};
      if (!learnt || candidates.length === 0) {
        const decided = staticDecision(candidates, planned.reason, estimates, eliminated, input.segment);
        return { decision: decided.record, providers: decided.providers, tenantScope, ...codes, ...(probe !== undefined ? { probe } : {}) };
      }
      const objective: NetObjective | undefined =
        routing.objective === 'net'
          ? {
              amountMinor: input.amountMinor,
              fees: Object.fromEntries(candidates.map((provider) => [provider, feesFor({ provider, currency: input.currency, amountMinor: input.amountMinor, deployment: deps.fees ?? null, tenant: routing.fees ?? null })])),
            }
          : undefined;
      const decision = decideSuccessRate({
        candidates,
        segment: input.segment,
        counts: estimates.counts,
        uniform: splitDraw(`${input.paymentId}:route`),
        settings: { ...SUCCESS_RATE_DEFAULTS, exploration: routing.exploration ?? SUCCESS_RATE_DEFAULTS.exploration },
        eliminated,
        ...(objective ? { objective } : {}),
        ...(probe !== undefined ? { probe } : {}),
      });
      return {
        decision: {
          strategy: 'success_rate',
          candidates: decision.candidates.map((c) => ({ provider: c.provider, approval_estimate: c.approvalEstimate, selection_probability: c.selectionProbability })),
          chosen: decision.chosen,
          explored: decision.explored,
          reason: `${planned.reason}; ${decision.reason}`,
        },
        providers: decision.order,
        tenantScope,
        ...codes,
        ...(probe !== undefined ? { probe } : {}),
      };
    },

    /**
     * Counts one attempt's outcome in the shared state (db/routing.ts recordOutcome): every
     * attempt's answer or error toward the PSP's health; a payment's first attempt at a PSP, the
     * issuer's answer, toward approvals and declines. Committed without waiting for the WAL flush (a
     * crash may lose the last few outcomes of a statistic; bench/results/routing-store.md).
     */
    async recordRouteOutcome(input: RouteOutcomeInput): Promise<RecordedOutcome> {
      return recordOutcome(deps.sql, { ...input, health, asyncCommit: true });
    },

    /**
     * One call of a PSP's budget across the fleet (PROVIDER_RATE_LIMITS): allowed now, or not
     * before `waitMs`. A PSP without a limit is always allowed (no database call).
     */
    async takeProviderCall(input: { provider: string }): Promise<CallPermit> {
      const limit = deps.callLimits?.[input.provider];
      return limit ? takeCall(deps.sql, input.provider, limit) : { allowed: true };
    },
  };
}

export type RouteDecisionSteps = ReturnType<typeof createRouteDecisionSteps>;
