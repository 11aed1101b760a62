import type { Db } from './connect';
import { levelEstimate, segmentLevels, SUCCESS_RATE_DEFAULTS, withOutcome, type OutcomeCounts, type OutcomeSettings, type RoutingSegment, type SegmentCounts } from '../domain/routing-success-rate';

/**
 * Success-rate routing's shared state in PostgreSQL (migration 028; docs/routing-and-waits.md):
 * every worker and API process reads and writes the same rows, so what one learns of a PSP all
 * know at their next decision.
 *
 * - routing_outcomes: per (scope, PSP, segment level) the counts domain/routing-success-rate.ts
 *   decides from, updated by one UPSERT per outcome with the same arithmetic as its withOutcome
 *   (test/integration/routing-store.test.ts holds the two equal).
 * - routing_health: per PSP, its errors among every charge attempt's outcomes; too many put it
 *   out of first place for every worker (`eliminated_until`), then one payment at a time
 *   probes it back. The one health mechanism: worker/provider-health.ts only shows it.
 * - provider_call_tokens: a token bucket per PSP (takeCall), its calls per second held across
 *   the fleet.
 */

/** The scope of pooled counts (every tenant's outcomes); a tenant with `routing.scope: "tenant"` also has its own, under its id. */
export const POOLED_SCOPE = '';

/**
 * What an attempt's outcome counts as: the issuer's answer (approved, declined), another answer
 * of the PSP (a challenge, a refusal of the request: its health only), or the PSP's own error
 * (its health).
 */
export type RoutingOutcome = 'approved' | 'declined' | 'answered' | 'error';

/**
 * The one health mechanism's settings (routing_health; every worker and API process reads and
 * feeds the same rows): a PSP whose errors make at least
 * `errorRate` of its last calls (weighted by `decay` per call, at least `minCalls` of them,
 * forgotten after `windowMs` without a call) is out of first place for `eliminateMs`; then one
 * payment at a time probes it (its outcome awaited for `probeTimeoutMs`): a success brings it
 * back, an error puts it out again. A PSP whose errors went from none to all is out after at
 * most 7 of its payments (decay 0.9: its weighted calls reach `minCalls` at the 7th, all of them
 * errors), at once for every worker; one with little traffic that has met only errors for
 * `failingMs` is out at its next error, however few its calls. Every charge attempt's outcome
 * counts (activities/provider-steps.ts chargeAttempt): a later attempt's and a retry's too.
 */
export interface HealthSettings {
  decay: number;
  minCalls: number;
  errorRate: number;
  windowMs: number;
  /** Errors only (no answer between, no gap of `windowMs`) for this long put it out at its next error, however few its calls. */
  failingMs: number;
  eliminateMs: number;
  probeTimeoutMs: number;
}

export const HEALTH_DEFAULTS: HealthSettings = { decay: 0.9, minCalls: 5, errorRate: 0.5, windowMs: 30_000, failingMs: 20_000, eliminateMs: 30_000, probeTimeoutMs: 60_000 };

export interface RecordOutcomeInput {
  provider: string;
  segment: RoutingSegment;
  outcome: RoutingOutcome;
  /**
   * Whether this is the payment's first attempt at this PSP: only those count toward approvals
   * and declines (not a recovery's retries, not a retry of the same attempt, not a move after a
   * failover). The caller knows. Every outcome counts toward the PSP's health.
   */
  firstAttempt: boolean;
  /** The scopes counted in: the pooled one always, and the tenant's own when its routing.scope is "tenant". */
  tenantScope?: string | null;
  settings?: OutcomeSettings;
  health?: HealthSettings;
  /**
   * Commit without waiting for the WAL flush (synchronous_commit off for this statement's own
   * transaction): a crash may lose the last few outcomes of a statistic, never money, and the
   * rows' locks are held for less. Only with a `db` that is not a transaction holding other
   * writes (it would apply to all of them): the activity passes its pool.
   */
  asyncCommit?: boolean;
}

export interface RecordedOutcome {
  recorded: boolean;
  /** The fall detector reset the long memory of one of the segment's levels (the PSP is out of first place for that segment a while). */
  fell: boolean;
  /** The PSP's shared health after it: out of first place until then (null: in). */
  eliminatedUntil: Date | null;
}

/** The health half of an outcome: one statement's CTE, the PSP's row updated under its lock. */
function healthUpsert(db: Db, provider: string, error: boolean, health: HealthSettings) {
  const e = error ? 1 : 0;
  return db`
    INSERT INTO routing_health AS h (provider, calls, errors, failing_since, updated_at) VALUES (${provider}, 1, ${e}, CASE WHEN ${e} = 1 THEN now() END, now())
    ON CONFLICT (provider) DO UPDATE SET (calls, errors, eliminated_until, eliminated_reason, probe_until, failing_since, updated_at) = (
      SELECT
        CASE WHEN closed AND NOT trips THEN c WHEN closed OR probing THEN 0 ELSE h.calls END,
        CASE WHEN closed AND NOT trips THEN x.e ELSE CASE WHEN closed OR probing THEN 0 ELSE h.errors END END,
        CASE WHEN closed AND trips THEN now() + ${health.eliminateMs} * interval '1 millisecond'
             WHEN probing AND ${e} = 1 THEN now() + ${health.eliminateMs} * interval '1 millisecond'
             WHEN probing THEN NULL ELSE h.eliminated_until END,
        CASE WHEN closed AND rated THEN format('%s errors in its last %s calls', round(x.e::numeric, 1), round(c::numeric, 1))
             WHEN closed AND trips THEN format('only errors for %s s', round(extract(epoch FROM now() - failing)::numeric))
             WHEN probing AND ${e} = 1 THEN 'its probe failed'
             WHEN probing THEN NULL ELSE h.eliminated_reason END,
        CASE WHEN probing THEN NULL ELSE h.probe_until END,
        CASE WHEN closed AND NOT trips THEN failing ELSE NULL END,
        now()
      FROM (SELECT *, rated OR (closed AND failing <= now() - ${health.failingMs} * interval '1 millisecond') AS trips
            FROM (SELECT *, closed AND c >= ${health.minCalls} AND e >= ${health.errorRate} * c AS rated
                  FROM (SELECT h.eliminated_until IS NULL AS closed,
                               coalesce(h.eliminated_until <= now() AND h.probe_until > now(), false) AS probing,
                               h.calls * w + 1 AS c, h.errors * w + ${e} AS e,
                               -- Errors only since then: kept while every outcome is an error and none is a window apart.
                               CASE WHEN ${e} = 0 THEN NULL WHEN w = 0 THEN now() ELSE coalesce(h.failing_since, now()) END AS failing
                        FROM (SELECT CASE WHEN h.updated_at < now() - ${health.windowMs} * interval '1 millisecond' THEN 0 ELSE ${health.decay}::float8 END AS w) fade) y) r) x)
    RETURNING eliminated_until`;
}

/** A one-row FROM item that, with `asyncCommit`, turns synchronous_commit off for the statement's own transaction. */
function commitMode(db: Db, input: Pick<RecordOutcomeInput, 'asyncCommit'>) {
  return input.asyncCommit ? db`(SELECT set_config('synchronous_commit', 'off', true)) AS commit_mode` : db`(SELECT 1) AS commit_mode`;
}

/**
 * Counts one attempt's outcome, in one statement: the PSP's health (every outcome of every
 * attempt: an error counts against it, an answer for it) and, for a payment's first attempt at
 * the PSP, per scope and level of the segment, the issuer's answer into the recency-weighted
 * counts (withOutcome's arithmetic, with the fall detector routing_fallen), or a PSP error into
 * `errors_total` alone. Any other outcome (a later attempt's, an answer that is not the
 * issuer's) moves the health alone (`recorded`: false).
 */
export async function recordOutcome(db: Db, input: RecordOutcomeInput): Promise<RecordedOutcome> {
  const health = input.health ?? HEALTH_DEFAULTS;
  if (!input.firstAttempt || input.outcome === 'answered') {
    const rows = await db<{ eliminated_until: Date | null }[]>`
      WITH health AS (${healthUpsert(db, input.provider, input.outcome === 'error', health)})
      SELECT (SELECT eliminated_until FROM health) FROM ${commitMode(db, input)}`;
    return { recorded: false, fell: false, eliminatedUntil: rows[0]?.eliminated_until ?? null };
  }
  const settings = input.settings ?? SUCCESS_RATE_DEFAULTS;
  const scopes = input.tenantScope ? [POOLED_SCOPE, input.tenantScope] : [POOLED_SCOPE];
  const levels = segmentLevels(input.segment);
  const { provider, outcome } = input;
  const error = outcome === 'error';
  if (error) {
    const rows = await db<{ eliminated_until: Date | null; fell: boolean }[]>`
      WITH health AS (${healthUpsert(db, provider, true, health)}),
      counted AS (
        INSERT INTO routing_outcomes AS o (scope, provider, segment, approvals, declines, recent_approvals, recent_declines, errors_total)
        SELECT s, ${provider}, l, 0, 0, 0, 0, 1 FROM unnest(${scopes}::text[]) s CROSS JOIN unnest(${levels}::text[]) l
        ON CONFLICT (scope, provider, segment) DO UPDATE SET errors_total = o.errors_total + 1, updated_at = now()
        RETURNING false AS fell)
      SELECT (SELECT eliminated_until FROM health), false AS fell FROM counted, ${commitMode(db, input)} LIMIT 1`;
    return { recorded: true, fell: false, eliminatedUntil: rows[0]?.eliminated_until ?? null };
  }
  const approved = outcome === 'approved';
  const a = approved ? 1 : 0;
  // A level's first outcome: the model's own arithmetic from nothing.
  const first: OutcomeCounts = withOutcome(undefined, approved, settings);
  const { prior } = settings;
  const rows = await db<{ eliminated_until: Date | null; fell: boolean }[]>`
    WITH health AS (${healthUpsert(db, provider, false, health)}),
    counted AS (
      INSERT INTO routing_outcomes AS o (scope, provider, segment, approvals, declines, recent_approvals, recent_declines, approvals_total, declines_total)
      SELECT s, ${provider}, l, ${first.approvals}, ${first.declines}, ${first.recentApprovals}, ${first.recentDeclines}, ${a}, ${1 - a}
      FROM unnest(${scopes}::text[]) s CROSS JOIN unnest(${levels}::text[]) l
      ON CONFLICT (scope, provider, segment) DO UPDATE SET
        (approvals, declines, recent_approvals, recent_declines, fell_at) = (
          SELECT CASE WHEN f THEN ra ELSE n.a END, CASE WHEN f THEN rd ELSE n.d END, ra, rd, CASE WHEN f THEN now() ELSE o.fell_at END
          FROM (SELECT *, routing_fallen(a, d, ra, rd, ${prior.approvals}, ${prior.declines}, ${settings.minOutcomes}, ${settings.fallingZ}) AS f
                FROM (SELECT o.approvals * ${settings.decay}::float8 + ${a} AS a, o.declines * ${settings.decay}::float8 + ${1 - a} AS d,
                             o.recent_approvals * ${settings.recentDecay}::float8 + ${a} AS ra, o.recent_declines * ${settings.recentDecay}::float8 + ${1 - a} AS rd) m) n),
        approvals_total = o.approvals_total + ${a},
        declines_total = o.declines_total + ${1 - a},
        updated_at = now()
      RETURNING o.fell_at IS NOT DISTINCT FROM now() AS fell)
    SELECT (SELECT eliminated_until FROM health), bool_or(fell) AS fell FROM counted, ${commitMode(db, input)}`;
  return { recorded: true, fell: rows[0]?.fell ?? false, eliminatedUntil: rows[0]?.eliminated_until ?? null };
}

/** A PSP's shared health as a decision reads it. */
export interface ProviderStanding {
  state: 'closed' | 'open' | 'half_open';
  /** Why it is out (open, half-open). */
  reason: string | null;
  /** A probe is in flight (half-open): the next payments leave it where it is. */
  probing: boolean;
}

export interface Estimates {
  /** The counts of the segment's levels, by PSP then level: what domain/routing-success-rate.ts decides from. */
  counts: SegmentCounts;
  /** The PSPs whose approvals fell at one of the segment's levels within the elimination time, with the level. */
  fell: Record<string, string>;
  /** Each PSP's shared health (a PSP without a row is closed). */
  health: Record<string, ProviderStanding>;
}

/**
 * The counts a decision needs for one payment: its candidates' rows at its segment's levels in
 * one scope, and their health, read in one statement with PostgreSQL's clock (every worker
 * judges time alike).
 */
export async function readEstimates(db: Db, input: { scope: string; providers: readonly string[]; segment: RoutingSegment; health?: HealthSettings }): Promise<Estimates> {
  const health = input.health ?? HEALTH_DEFAULTS;
  const levels = segmentLevels(input.segment);
  const providers = [...input.providers];
  const rows = await db<
    {
      kind: 'counts' | 'health';
      provider: string;
      segment: string | null;
      approvals: number | null;
      declines: number | null;
      recent_approvals: number | null;
      recent_declines: number | null;
      fell_recently: boolean | null;
      state: ProviderStanding['state'] | null;
      reason: string | null;
      probing: boolean | null;
    }[]
  >`
    SELECT 'counts' AS kind, provider, segment, approvals, declines, recent_approvals, recent_declines,
           fell_at > now() - ${health.eliminateMs} * interval '1 millisecond' AS fell_recently,
           NULL AS state, NULL AS reason, NULL::boolean AS probing
    FROM routing_outcomes WHERE scope = ${input.scope} AND provider = ANY (${providers}::text[]) AND segment = ANY (${levels}::text[])
    UNION ALL
    SELECT 'health', provider, NULL, NULL, NULL, NULL, NULL, NULL,
           CASE WHEN eliminated_until IS NULL THEN 'closed' WHEN eliminated_until > now() THEN 'open' ELSE 'half_open' END,
           eliminated_reason, coalesce(probe_until > now(), false)
    FROM routing_health WHERE provider = ANY (${providers}::text[])`;
  const counts: Record<string, Record<string, OutcomeCounts>> = {};
  const fell: Record<string, string> = {};
  const standing: Record<string, ProviderStanding> = {};
  for (const row of rows) {
    if (row.kind === 'health') {
      standing[row.provider] = { state: row.state!, reason: row.reason, probing: row.probing === true };
      continue;
    }
    (counts[row.provider] ??= {})[row.segment!] = { approvals: row.approvals!, declines: row.declines!, recentApprovals: row.recent_approvals!, recentDeclines: row.recent_declines! };
    // The finest level that fell names it.
    if (row.fell_recently && (fell[row.provider] === undefined || levels.indexOf(row.segment!) < levels.indexOf(fell[row.provider]!))) fell[row.provider] = row.segment!;
  }
  return { counts, fell, health: standing };
}

/**
 * Takes the probe of a PSP whose elimination ended (half-open) for one payment, if no other
 * payment holds it: the payment then tries it first, and its outcome (recordOutcome) brings the
 * PSP back or puts it out again. False: another payment probes it now, or it is not half-open.
 */
export async function takeProbe(db: Db, provider: string, health: HealthSettings = HEALTH_DEFAULTS): Promise<boolean> {
  const rows = await db`
    UPDATE routing_health SET probe_until = now() + ${health.probeTimeoutMs} * interval '1 millisecond'
    WHERE provider = ${provider} AND eliminated_until <= now() AND (probe_until IS NULL OR probe_until <= now())
    RETURNING provider`;
  return rows.length > 0;
}

/**
 * Gives back the probe `takeProbe` gave a payment that will not try the PSP after all (an
 * earlier try of its first attempt was recorded at another PSP), so the next payment may probe.
 */
export async function releaseProbe(db: Db, provider: string): Promise<void> {
  await db`UPDATE routing_health SET probe_until = NULL WHERE provider = ${provider} AND eliminated_until <= now() AND probe_until > now()`;
}

/** One row of the store as GET /admin/routing and /metrics show it. */
export interface OutcomeRow {
  scope: string;
  provider: string;
  segment: string;
  approvals: number;
  declines: number;
  recentApprovals: number;
  recentDeclines: number;
  approvalsTotal: number;
  declinesTotal: number;
  errorsTotal: number;
  updatedAt: Date;
}

/** Every row of one scope, by segment then provider (bounded: one per PSP and segment level). */
export async function listOutcomes(db: Db, scope: string): Promise<OutcomeRow[]> {
  const rows = await db<
    { scope: string; provider: string; segment: string; approvals: number; declines: number; recent_approvals: number; recent_declines: number; approvals_total: number; declines_total: number; errors_total: number; updated_at: Date }[]
  >`SELECT scope, provider, segment, approvals, declines, recent_approvals, recent_declines, approvals_total, declines_total, errors_total, updated_at
    FROM routing_outcomes WHERE scope = ${scope} ORDER BY segment, provider`;
  return rows.map((r) => ({
    scope: r.scope,
    provider: r.provider,
    segment: r.segment,
    approvals: r.approvals,
    declines: r.declines,
    recentApprovals: r.recent_approvals,
    recentDeclines: r.recent_declines,
    approvalsTotal: r.approvals_total,
    declinesTotal: r.declines_total,
    errorsTotal: r.errors_total,
    updatedAt: r.updated_at,
  }));
}

/** One PSP at one segment level now: its counts, its estimate, its share of that level's recent outcomes. */
export interface SegmentEstimate {
  provider: string;
  approvalEstimate: number;
  /** Weighted (recency-faded) outcomes the estimate rests on. */
  outcomes: number;
  /** Its share of the level's weighted outcomes across PSPs (its share of the traffic lately). */
  share: number;
  approvals: number;
  declines: number;
  errors: number;
}

/** Every segment level of one scope with each PSP's estimate there (GET /admin/routing, /metrics). */
export async function routingSnapshot(db: Db, scope: string): Promise<{ segment: string; providers: SegmentEstimate[] }[]> {
  const bySegment = new Map<string, OutcomeRow[]>();
  for (const row of await listOutcomes(db, scope)) bySegment.set(row.segment, [...(bySegment.get(row.segment) ?? []), row]);
  return [...bySegment].map(([segment, rows]) => {
    const total = rows.reduce((sum, r) => sum + r.approvals + r.declines, 0);
    return {
      segment,
      providers: rows.map((r) => ({
        provider: r.provider,
        approvalEstimate: levelEstimate(r),
        outcomes: r.approvals + r.declines,
        share: total > 0 ? (r.approvals + r.declines) / total : 0,
        approvals: r.approvalsTotal,
        declines: r.declinesTotal,
        errors: r.errorsTotal,
      })),
    };
  });
}

/** Every PSP's shared health now. */
export async function listHealth(db: Db): Promise<({ provider: string; eliminatedUntil: Date | null } & ProviderStanding)[]> {
  const rows = await db<{ provider: string; state: ProviderStanding['state']; reason: string | null; probing: boolean; eliminated_until: Date | null }[]>`
    SELECT provider, CASE WHEN eliminated_until IS NULL THEN 'closed' WHEN eliminated_until > now() THEN 'open' ELSE 'half_open' END AS state,
           eliminated_reason AS reason, coalesce(probe_until > now(), false) AS probing, eliminated_until
    FROM routing_health ORDER BY provider`;
  return rows.map((r) => ({ provider: r.provider, state: r.state, reason: r.reason, probing: r.probing, eliminatedUntil: r.eliminated_until }));
}

/** A PSP's calls per second across the fleet, and the most taken at once after a quiet spell. */
export interface CallLimit {
  perSecond: number;
  burst: number;
}

/** A call may be made now, or not before `waitMs`. */
export type CallPermit = { allowed: true } | { allowed: false; waitMs: number };

/**
 * Takes one call of a PSP's budget from its shared token bucket, in one UPSERT: the row is
 * locked, refilled for the time since its last refill (PostgreSQL's clock, read after the
 * lock, so every connection sees time move forward), and one token taken if there is one.
 * Charges, captures, voids, refunds and lookups all take one.
 */
export async function takeCall(db: Db, provider: string, limit: CallLimit): Promise<CallPermit> {
  const [row] = await db<{ tokens: number; taken: boolean }[]>`
    INSERT INTO provider_call_tokens AS t (provider, tokens, refilled_at, taken) VALUES (${provider}, ${limit.burst - 1}, clock_timestamp(), true)
    ON CONFLICT (provider) DO UPDATE SET (tokens, refilled_at, taken) = (
      SELECT CASE WHEN available >= 1 THEN available - 1 ELSE available END, at, available >= 1
      FROM (SELECT least(${limit.burst}::float8, t.tokens + greatest(0, extract(epoch FROM at - t.refilled_at)) * ${limit.perSecond}) AS available, at
            FROM (SELECT greatest(t.refilled_at, clock_timestamp()) AS at) now_) x)
    RETURNING tokens, taken`;
  if (row!.taken) return { allowed: true };
  return { allowed: false, waitMs: Math.max(1, Math.ceil(((1 - row!.tokens) / limit.perSecond) * 1000)) };
}
