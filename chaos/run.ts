import { mkdirSync, writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import path from 'node:path';
import { availableParallelism } from 'node:os';
import { check, runningWorkflows, type PaymentCensus, type Verdict } from './checker';
import type { reconciliationWorkflow } from '../workflows/reconciliation';
import { DOUBLE, DOUBLE_PSP, DOUBLE_TENANTS, DISPUTE_TIMES, PSPS, WAITS, startEnvironment, type ChaosEnvironment } from './environment';
import { doubleFaultKinds, describeSchedule, faultSchedule, killPointPlan, pspFaultKinds, type NemesisEvent, type TemporalMode } from './nemesis';
import { Prng } from './prng';
import { Workload, type Operation } from './workload';

export interface ChaosOptions {
  minutes: number;
  seed: number;
  /** Where the census and the summary are written. */
  resultsDir: string;
  logsDir: string;
  /** Concurrent clients of the workload. */
  clients?: number;
  /** Pause between two fault events, drawn in this range. */
  gapMs?: [number, number];
  keyTtlSeconds?: number;
  /** Which Temporal (default dev): the dev server, or the two-node production cluster. */
  temporal?: TemporalMode;
  /** How long the system may take to go quiet after the load before what is left counts as found. */
  quietMs?: number;
  log?: (line: string) => void;
}

export interface ChaosSummary {
  seed: number;
  minutes: number;
  startedAt: string;
  loadMs: number;
  /** How long the system took to go quiet after the load. */
  quietMs: number;
  /** Of the wait for quiet, how long the database was quiet while a workflow without a reason to run was still closing. */
  workflowsQuietAfterDatabaseMs: number;
  totalMs: number;
  machine: { cpus: number; node: string };
  settings: { temporal: TemporalMode; clients: number; gapMs: [number, number]; keyTtlSeconds: number; apiProcesses: number };
  operations: Record<string, number>;
  payments: number;
  refunds: number;
  paymentsByStatus: Record<string, number>;
  faultsInjected: Record<string, number>;
  /** Of faultsInjected, the faults that struck sandbox-a (sandbox-b is never struck). */
  faultsOnSandboxA: Record<string, number>;
  /** Of faultsInjected, the faults that struck the PSP double (DOUBLE_PSP). */
  faultsOnDouble: Record<string, number>;
  /** The double's webhooks its loss fault kept back, sent again by the run (as its PSP's retries would). */
  doubleNotificationsRedelivered: number;
  faultsSkipped: Record<string, number>;
  /** Where payments went across the PSPs (payment_attempts). */
  failover: FailoverFigures;
  /** Saved cards and the off-session payments that charged them. */
  savedCards: SavedCardFigures;
  /** The disputes of the run's payments and what the workload answered. */
  disputes: DisputeFigures;
  schedule: NemesisEvent[];
  workerKillPoints: (string | null)[];
  processStarts: Record<string, { starts: number; unplannedExits: number; failedStarts: number }>;
  network: Record<string, number>;
  checks: Verdict['checks'];
  findings: string[];
  passed: number;
  failed: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * What the database still has open: payments waiting for the PSP or the customer (processing,
 * requires_action: each ends by its window at the latest) or recovering (ends by its recovery
 * window at the latest), refunds pending, disputes not
 * closed (each ends by its evidence deadline at the latest), keys running, events undelivered
 * (-1: unreachable).
 */
export async function openInDatabase(sql: ChaosEnvironment['sql']): Promise<number> {
  const [open] = await sql<{ n: number }[]>`
    SELECT (SELECT count(*) FROM payments WHERE status IN ('processing', 'requires_action', 'recovering'))
         + (SELECT count(*) FROM refunds WHERE status = 'pending')
         + (SELECT count(*) FROM disputes WHERE status IN ('needs_response', 'under_review'))
         + (SELECT count(*) FROM idempotency_records WHERE state = 'running')
         + (SELECT count(*) FROM outbox_events WHERE delivery_state = 'pending') AS n`.catch(() => [{ n: -1 }]);
  return open!.n;
}

/**
 * What the PSPs still have open: disputes the network is yet to open (a charge's `dispute_at`)
 * or to decide, and webhooks not yet delivered (retried with a backoff of up to 30 s after an
 * outage of ours); our side hears of each by its webhooks or its run's polls (-1: unreachable).
 * A webhook the sandbox lost for good is not waited for: reconcileAfterRun finds its dispute.
 */
export async function openAtPsps(pspSql: ChaosEnvironment['pspSql']): Promise<number> {
  let total = 0;
  for (const psp of Object.values(pspSql)) {
    const [open] = await psp<{ n: number }[]>`
      SELECT (SELECT count(*) FROM sandbox.charges WHERE dispute_at IS NOT NULL)
           + (SELECT count(*) FROM sandbox.disputes WHERE status IN ('needs_response', 'under_review'))
           + (SELECT count(*) FROM sandbox.events WHERE state = 'pending' AND webhook_url IS NOT NULL) AS n`.catch(() => [{ n: -1 }]);
    if (open!.n < 0) return -1;
    total += Number(open!.n);
  }
  return total;
}

/**
 * What the PSP double still has open: webhooks not yet delivered (pending, or lost and
 * not yet sent again; the environment sends the lost ones again every few seconds). -1: unreadable.
 */
export async function openAtDouble(double: ChaosEnvironment['double'] | undefined): Promise<number> {
  if (!double) return 0;
  try {
    const census = await double.census();
    const open = census.flatMap((p) => p.notifications).filter((n) => n.state !== 'delivered').length;
    if (open > 0) await double.redeliverLost();
    return open;
  } catch {
    return -1;
  }
}

/**
 * Waits until the system is quiet, or until `deadline`: nothing open in the database, and no
 * workflow running but those of payments awaiting capture. The database alone is not enough:
 * a worker killed right after a record step committed leaves the payment final in PostgreSQL
 * while its workflow waits for the timed-out workflow task to run again on the next worker,
 * and closes only then. A run that never closes is still found: the wait ends at the
 * deadline and the checker names what is left. Returns how long the database was quiet
 * before the workflows were.
 */
export async function waitUntilQuiet(env: Pick<ChaosEnvironment, 'sql' | 'pspSql' | 'temporal' | 'tenants'> & Partial<Pick<ChaosEnvironment, 'double'>>, deadline: number): Promise<{ waitedForWorkflowsMs: number }> {
  let databaseQuietSince: number | null = null;
  for (;;) {
    const [ours, psps, double] = [await openInDatabase(env.sql), await openAtPsps(env.pspSql), await openAtDouble(env.double)];
    const open = ours < 0 || psps < 0 || double < 0 ? -1 : ours + psps + double;
    if (open === 0) databaseQuietSince ??= Date.now();
    else databaseQuietSince = null;
    const running = open === 0 ? await runningWorkflows(env.sql, env.temporal, env.tenants.map((t) => t.id)).catch(() => null) : null;
    if (running && running.withoutReason.length === 0) return { waitedForWorkflowsMs: Date.now() - databaseQuietSince! };
    if (Date.now() > deadline) return { waitedForWorkflowsMs: databaseQuietSince ? Date.now() - databaseQuietSince : 0 };
    await sleep(1000);
  }
}

/**
 * The product's recovery for a PSP webhook lost for good (the sandbox's `loss` fault): the
 * hourly reconciliation (worker/schedules.ts) starts the workflow of every dispute the PSP
 * reports and no webhook told us of. The run cannot wait for the Schedule's next hour (its
 * environment pauses the reconciliation Schedules, so none strikes mid-run), so it runs the same
 * workflow once over the run's window, as an operator's trigger would, on the run's worker. The dispute workflows it starts record their disputes after it returns, so it
 * then waits, until `deadline`, for every PSP dispute to have its row, and for the system to
 * go quiet again. Returns how many dispute rows that added, and the reconciliation's
 * discrepancies per PSP; throws if the workflow failed (a provider's run failed).
 */
export async function reconcileAfterRun(
  env: Pick<ChaosEnvironment, 'sql' | 'pspSql' | 'temporal' | 'taskQueue' | 'tenants'>,
  from: Date,
  deadline: number,
): Promise<{ disputesFound: number; discrepancies: Record<string, number> }> {
  const ours = async () => (await env.sql<{ provider: string; provider_dispute_id: string }[]>`SELECT provider, provider_dispute_id FROM disputes`).map((d) => `${d.provider} ${d.provider_dispute_id}`);
  const before = (await ours()).length;
  const window = { kind: 'explicit' as const, from: from.toISOString(), to: new Date(Date.now() + 1000).toISOString() };
  const result = await env.temporal.workflow.execute<typeof reconciliationWorkflow>('reconciliationWorkflow', {
    taskQueue: env.taskQueue,
    workflowId: `chaos-reconciliation-${window.to}`,
    args: [{ providers: [...PSPS], window }],
  });
  const atPsps: string[] = [];
  for (const [provider, psp] of Object.entries(env.pspSql)) atPsps.push(...(await psp<{ id: string }[]>`SELECT id FROM sandbox.disputes`).map((d) => `${provider} ${d.id}`));
  for (;;) {
    const recorded = new Set(await ours());
    if (atPsps.every((d) => recorded.has(d)) || Date.now() > deadline) break;
    await sleep(500);
  }
  await waitUntilQuiet(env, deadline);
  return { disputesFound: (await ours()).length - before, discrepancies: Object.fromEntries(result.runs.map((r) => [r.provider, r.discrepancyCount])) };
}

/**
 * The faults during which a payment's attempt at sandbox-a certainly takes no money and moves
 * on: it refuses connections (killed, `down`), refuses writes (`unavailable`), or declines
 * with a code the route retries elsewhere (`declining`). Each sends a probe payment into it.
 * A probe finds sandbox-a first only while the worker's breaker has not put it last (an
 * earlier outage opens it for a while), so every such fault probes, not just one.
 */
const failoverProbeKinds = new Set<string>(['kill-sandbox', 'outage-down', 'outage-unavailable', 'outage-declining']);
/** How long after such a fault starts its probe payment is sent: inside the fault (at least 2 s long). */
const FAILOVER_PROBE_DELAY_MS = 1_000;

/**
 * One chaos run: the environment, the workload for `minutes` while the nemesis strikes on
 * its seeded schedule, everything restored, the system left to go quiet, then the checker.
 * Writes census.json.gz and summary.{json,md} to resultsDir.
 */
export async function runChaos(options: ChaosOptions): Promise<{ summary: ChaosSummary; verdict: Verdict }> {
  const log = options.log ?? ((line: string) => console.log(line));
  const rng = new Prng(options.seed);
  const clients = options.clients ?? 6;
  const gapMs = options.gapMs ?? [15_000, 45_000];
  const keyTtlSeconds = options.keyTtlSeconds ?? 5;
  const apiCount = 2;
  const loadMs = Math.round(options.minutes * 60_000);
  const temporalMode = options.temporal ?? 'dev';
  // Every kind of fault of sandbox-a and of the PSP double is struck at least once, however short the run.
  const schedule = faultSchedule(rng.fork(1), { durationMs: loadMs, gapMs, apiCount, temporal: temporalMode, required: [...pspFaultKinds, ...doubleFaultKinds] });
  log(`chaos: seed ${options.seed}, ${options.minutes} min, ${clients} clients, keys expire after ${keyTtlSeconds} s, Temporal ${temporalMode === 'cluster' ? 'cluster (two nodes)' : 'dev server'}`);
  log(`fault schedule (${schedule.length} events):\n${describeSchedule(schedule)}`);

  let loadRunning = true;
  const nextKillPoint = killPointPlan(rng.fork(2));
  const started = Date.now();
  const env = await startEnvironment({
    logsDir: options.logsDir,
    keyTtlSeconds,
    apiCount,
    temporal: temporalMode,
    killPointFor: () => (loadRunning ? nextKillPoint() : null),
  });
  try {
    log(`environment up in ${((Date.now() - started) / 1000).toFixed(0)} s; load starts`);
    const loadStarted = Date.now();
    // One workload per tenant (the first routed a then b, the second split between them, the third
    // the PSP double then b, telling only the stories the double can do); the clients take turns.
    const workloads = env.tenants.map(
      (tenant, i) =>
        new Workload({
          apiUrls: () => env.apiUrls,
          apiKey: tenant.apiKey,
          rng: rng.fork(3 + i),
          operationTimeoutMs: 120_000,
          shouldStop: () => Date.now() - loadStarted > loadMs,
          ...(DOUBLE_TENANTS.has(tenant.name) ? { double: DOUBLE.chaosMethods } : {}),
        }),
    );
    const paymentsSoFar = () => workloads.reduce((n, w) => n + w.paymentIds.size, 0);
    const clientsDone = Promise.all(Array.from({ length: clients }, (_, c) => workloads[c % workloads.length]!.runClient()));

    const strikes: Promise<void>[] = [];
    const probes: Promise<unknown>[] = [];
    for (const event of schedule) {
      const wait = loadStarted + event.atMs - Date.now();
      if (wait > 0) await sleep(wait);
      log(`+${((Date.now() - loadStarted) / 1000).toFixed(0)} s: ${event.faults.map((f) => f.kind).join(' + ')} (${paymentsSoFar()} payments so far)`);
      for (const fault of event.faults) {
        // While sandbox-a is down (killed, or its outage refusing connections), one payment of the
        // tenant routed a then b is sure to meet it: the census sees a failover in every run, not by luck.
        const probe = failoverProbeKinds.has(fault.kind)
          ? () => probes.push(sleep(FAILOVER_PROBE_DELAY_MS).then(() => workloads[0]!.payOnce()).catch((error) => log(`failover probe broke: ${(error as Error).message}`)))
          : undefined;
        strikes.push(env.strike(fault, probe).catch((error) => log(`fault ${fault.kind} broke: ${(error as Error).message}`)));
      }
    }
    await sleep(Math.max(0, loadStarted + loadMs - Date.now()));
    loadRunning = false;
    log(`load time over (${paymentsSoFar()} payments); finishing the clients' stories and restoring everything`);
    await Promise.all(strikes);
    await Promise.all(probes);
    await env.restore();
    await env.disarmWorker();
    // The PSP double loses no more webhooks, and sends again those it lost: a capture or
    // refund waiting for its notification is decided, and its client's story can end.
    await env.double.settle();
    await clientsDone;
    const loadEnded = Date.now();
    const operations = workloads.flatMap((w) => w.operations);
    const customerActions: Record<string, number> = {};
    for (const w of workloads) for (const [action, n] of Object.entries(w.customerActions)) customerActions[action] = (customerActions[action] ?? 0) + n;
    const disputeActions: Record<string, number> = {};
    for (const w of workloads) for (const [action, n] of Object.entries(w.disputeActions)) disputeActions[action] = (disputeActions[action] ?? 0) + n;
    const recoveryStories: Record<string, number> = {};
    for (const w of workloads) for (const [outcome, n] of Object.entries(w.recoveryStories)) recoveryStories[outcome] = (recoveryStories[outcome] ?? 0) + n;

    const quietDeadline = loadEnded + (options.quietMs ?? 300_000);
    const { waitedForWorkflowsMs } = await waitUntilQuiet(env, quietDeadline);
    if (waitedForWorkflowsMs >= 1000) log(`the database was quiet ${(waitedForWorkflowsMs / 1000).toFixed(0)} s before the last workflow without a reason to run closed`);
    // What it starts (a dispute's workflow and events, a late charge given back) is waited for like the rest.
    const reconciliation = await reconcileAfterRun(env, new Date(started - 60_000), Math.max(quietDeadline, Date.now() + 60_000)).catch((error: Error) => {
      log(`reconciliation after the run failed: ${error.message}`);
      return null;
    });
    if (reconciliation) log(`reconciliation after the run: ${reconciliation.disputesFound} disputes no webhook had told of; discrepancies ${JSON.stringify(reconciliation.discrepancies)}`);
    const quietAt = Date.now();
    log(`quiet in ${((quietAt - loadEnded) / 1000).toFixed(0)} s; checking`);

    const replay = async (op: Operation) => {
      for (let attempt = 0; attempt < 20; attempt++) {
        try {
          const response = await fetch(`${env.apiUrls[attempt % env.apiUrls.length]}${op.path}`, {
            method: 'POST',
            headers: { authorization: `Bearer ${op.apiKey}`, 'idempotency-key': op.key, 'content-type': 'application/json' },
            body: JSON.stringify(op.body),
            signal: AbortSignal.timeout(30_000),
          });
          const text = await response.text();
          // A 202 with Retry-After is a run still going; a waiting payment's recorded 202 has none.
          const running = response.status === 202 && response.headers.has('retry-after');
          if (response.status !== 503 && response.status !== 429 && !running) return { status: response.status, text };
        } catch {
          // retried below
        }
        await sleep(500);
      }
      return null;
    };
    // A payment whose client never got a final answer is still found through its key's record.
    for (const op of operations.filter((o) => o.kind === 'payment' && !o.paymentId)) {
      const [record] = await env.sql<{ resource_id: string }[]>`
        SELECT resource_id FROM idempotency_records WHERE idempotency_key = ${op.key} AND operation = 'POST /v1/payments'`;
      op.paymentId = record?.resource_id ?? null;
    }
    const verdict = await check({
      sql: env.sql,
      pspSql: env.pspSql,
      doubles: { [env.double.name]: env.double.url },
      temporal: env.temporal,
      tenantIds: env.tenants.map((t) => t.id),
      acks: env.merchant.acks,
      operations,
      replay,
      disputeReminders: DISPUTE_TIMES.reminderSeconds.length,
      authorizationWindowMs: WAITS.authorizationWindowSeconds * 1000,
    });

    // The PSP's own webhooks the API stored (each once; duplicates and lost ones are the sandbox's faults).
    const [pspEvents] = await env.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM provider_events`;
    const count = (items: string[]) => items.reduce<Record<string, number>>((acc, k) => ((acc[k] = (acc[k] ?? 0) + 1), acc), {});
    const summary: ChaosSummary = {
      seed: options.seed,
      minutes: options.minutes,
      startedAt: new Date(started).toISOString(),
      loadMs: loadEnded - loadStarted,
      quietMs: quietAt - loadEnded,
      workflowsQuietAfterDatabaseMs: waitedForWorkflowsMs,
      totalMs: Date.now() - started,
      machine: { cpus: availableParallelism(), node: process.version },
      settings: { temporal: temporalMode, clients, gapMs, keyTtlSeconds, apiProcesses: apiCount },
      operations: {
        ...count(operations.map((op) => op.kind + (op.copies > 1 ? ` (${op.copies} concurrent copies)` : ''))),
        'attempts in all': operations.reduce((n, op) => n + op.attempts, 0),
        'answers lost (dropped by the client, refused, reset)': operations.reduce((n, op) => n + op.lostAnswers, 0),
        'without a final answer during the load': operations.filter((op) => op.finalStatus === null).length,
        ...Object.fromEntries(Object.entries(customerActions).map(([action, n]) => [`3-D Secure customer: ${action}`, n])),
        ...Object.fromEntries(Object.entries(disputeActions).map(([action, n]) => [`dispute answered: ${action}`, n])),
        ...Object.fromEntries(Object.entries(recoveryStories).map(([outcome, n]) => [`recovery story: ${outcome}`, n])),
        'PSP webhooks received and stored (once per event)': pspEvents!.n,
        'disputes found by the reconciliation after the run (their webhooks lost)': reconciliation?.disputesFound ?? -1,
      },
      payments: verdict.census.length,
      refunds: verdict.census.reduce((n, p) => n + p.refunds.length, 0),
      paymentsByStatus: count(verdict.census.map((p) => p.status)),
      faultsInjected: { ...env.injected, 'worker killed at a kill point (or crashed)': env.supervisors.find((s) => s.name === 'worker')!.unplannedExits },
      faultsOnSandboxA: Object.fromEntries(pspFaultKinds.map((kind) => [kind, env.injected[kind] ?? 0])),
      faultsOnDouble: Object.fromEntries(doubleFaultKinds.map((kind) => [kind, env.injected[kind] ?? 0])),
      doubleNotificationsRedelivered: env.double.redelivered(),
      faultsSkipped: env.skipped,
      failover: failoverFigures(verdict.census),
      savedCards: savedCardFigures(verdict.census),
      disputes: disputeFigures(verdict.census),
      schedule,
      workerKillPoints: env.workerKillPoints,
      processStarts: Object.fromEntries(env.supervisors.map((s) => [s.name, { starts: s.starts, unplannedExits: s.unplannedExits, failedStarts: s.failedStarts }])),
      network: { ...env.proxy.counts },
      checks: verdict.checks,
      findings: verdict.findings,
      passed: verdict.passed,
      failed: verdict.failed,
    };
    writeResults(options.resultsDir, summary, verdict);
    return { summary, verdict };
  } finally {
    await env.teardown();
  }
}

export interface FailoverFigures {
  /** Payments held at each PSP (payments.provider), of those that hold a charge. */
  heldAt: Record<string, number>;
  /** Payments with an attempt at sandbox-a that moved on and a later one at sandbox-b. */
  failedOver: number;
  /** Of those, why they left sandbox-a: the attempt's outcome (and error code). */
  failedOverBecause: Record<string, number>;
  /** Failed-over payments that ended with money at sandbox-b (succeeded, refunded or authorized). */
  failedOverAndHeldAtB: number;
  /** Payments whose first attempt went to sandbox-b (the split tenant's pick, or sandbox-a's circuit open: tried last). */
  firstTriedAtB: number;
  /** Attempts per PSP and outcome. */
  attempts: Record<string, number>;
}

/** Where the payments went, from the census's attempts. */
export function failoverFigures(census: PaymentCensus[]): FailoverFigures {
  const figures: FailoverFigures = { heldAt: {}, failedOver: 0, failedOverBecause: {}, failedOverAndHeldAtB: 0, firstTriedAtB: 0, attempts: {} };
  const bump = (record: Record<string, number>, key: string) => (record[key] = (record[key] ?? 0) + 1);
  for (const payment of census) {
    if (payment.provider) bump(figures.heldAt, payment.provider);
    for (const attempt of payment.attempts) bump(figures.attempts, `${attempt.provider} ${attempt.outcome}`);
    if (payment.attempts[0]?.provider === 'sandbox-b') figures.firstTriedAtB++;
    const left = payment.attempts.findIndex((a, i) => a.provider === 'sandbox-a' && payment.attempts.slice(i + 1).some((b) => b.provider === 'sandbox-b'));
    if (left < 0) continue;
    figures.failedOver++;
    const why = payment.attempts[left]!;
    bump(figures.failedOverBecause, why.errorCode ? `${why.outcome} (${why.errorCode})` : why.outcome);
    if (payment.provider === 'sandbox-b' && ['succeeded', 'refunded', 'requires_capture'].includes(payment.status)) figures.failedOverAndHeldAtB++;
  }
  return figures;
}

export interface SavedCardFigures {
  /** Payments that asked to save their card (setup_future_usage), and how they ended. */
  saving: Record<string, number>;
  /** Off-session payments of a saved card, by final status. */
  offSession: Record<string, number>;
  /** Of those, the ones that moved from sandbox-a to sandbox-b (charged there by the network transaction id or its token). */
  offSessionFailedOver: number;
}

/** The census's payments that saved a card or charged one off-session. */
export function savedCardFigures(census: PaymentCensus[]): SavedCardFigures {
  const figures: SavedCardFigures = { saving: {}, offSession: {}, offSessionFailedOver: 0 };
  const bump = (record: Record<string, number>, key: string) => (record[key] = (record[key] ?? 0) + 1);
  for (const payment of census) {
    if (payment.savesCard) bump(figures.saving, payment.status);
    if (!payment.offSession) continue;
    bump(figures.offSession, payment.status);
    if (payment.attempts.some((a, i) => a.provider === 'sandbox-a' && payment.attempts.slice(i + 1).some((b) => b.provider === 'sandbox-b'))) figures.offSessionFailedOver++;
  }
  return figures;
}

export interface DisputeFigures {
  /** Payments with a dispute. */
  disputedPayments: number;
  /** Disputes by final stage and status (an inquiry that escalated ends a chargeback). */
  byOutcome: Record<string, number>;
  /** The workload's commands by kind and final answer (evidence winning or losing, accept). */
  answers: Record<string, number>;
  /** Dispute workflow runs (more runs than disputes: a webhook came after a run closed). */
  workflowRuns: number;
}

/** The census's disputes: how they ended and what the workload answered. */
export function disputeFigures(census: PaymentCensus[]): DisputeFigures {
  const figures: DisputeFigures = { disputedPayments: 0, byOutcome: {}, answers: {}, workflowRuns: 0 };
  const bump = (record: Record<string, number>, key: string) => (record[key] = (record[key] ?? 0) + 1);
  for (const payment of census) {
    if (payment.disputes.length > 0) figures.disputedPayments++;
    for (const dispute of payment.disputes) {
      bump(figures.byOutcome, `${dispute.stage} ${dispute.status}`);
      for (const answer of dispute.answers) bump(figures.answers, `${answer.command} ${answer.finalStatus ?? 'no answer'}`);
      figures.workflowRuns += dispute.workflowRuns;
    }
  }
  return figures;
}

function writeResults(dir: string, summary: ChaosSummary, verdict: Verdict): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'census.json.gz'), gzipSync(JSON.stringify(verdict.census, null, 1)));
  writeFileSync(path.join(dir, 'summary.json'), `${JSON.stringify(summary, null, 2)}\n`);
  writeFileSync(path.join(dir, 'summary.md'), renderSummary(summary));
}

export function renderSummary(s: ChaosSummary): string {
  const rows = (record: Record<string, number>) => Object.entries(record).map(([k, v]) => `| ${k} | ${v} |`);
  const lines = [
    `# Chaos run: seed ${s.seed}, ${s.minutes} min`,
    '',
    `Started ${s.startedAt}; Temporal ${s.settings.temporal === 'cluster' ? 'cluster of two nodes' : 'dev server'}; load ${(s.loadMs / 60_000).toFixed(1)} min, quiet in ${(s.quietMs / 1000).toFixed(0)} s, ${(s.totalMs / 60_000).toFixed(1)} min in all; ` +
      `${s.machine.cpus} CPUs (shared), Node ${s.machine.node}. ${s.settings.clients} clients, ${s.settings.apiProcesses} API processes, ` +
      `fault events every ${s.settings.gapMs[0] / 1000}–${s.settings.gapMs[1] / 1000} s, sandbox keys expire after ${s.settings.keyTtlSeconds} s.`,
    `Reproduce the fault schedule: \`npm run chaos -- --minutes ${s.minutes} --seed ${s.seed} --clients ${s.settings.clients} --gap ${s.settings.gapMs[0] / 1000}-${s.settings.gapMs[1] / 1000}${s.settings.temporal === 'cluster' ? ' --temporal cluster' : ''}\`.`,
    '',
    `**${s.payments} payments, ${s.refunds} refunds.** Final states: ${Object.entries(s.paymentsByStatus).map(([k, v]) => `${k} ${v}`).join(', ')}.`,
    '',
    '| operation | count |',
    '|---|---:|',
    ...rows(s.operations),
    '',
    '| fault injected | count |',
    '|---|---:|',
    ...rows(s.faultsInjected),
    '',
    `**Three PSPs** (sandbox-a, then sandbox-b; ${DOUBLE_PSP}, a PSP double, then sandbox-b; the nemesis strikes sandbox-a and ${DOUBLE_PSP}, never sandbox-b). Faults struck on sandbox-a:`,
    '',
    '| fault on sandbox-a | count |',
    '|---|---:|',
    ...rows(s.faultsOnSandboxA),
    '',
    `Faults struck on ${DOUBLE_PSP}: ${Object.entries(s.faultsOnDouble).map(([k, v]) => `${k} ${v}`).join(', ')}; its webhooks lost and sent again by the run: ${s.doubleNotificationsRedelivered}.`,
    '',
    `Payments failed over from sandbox-a to sandbox-b: **${s.failover.failedOver}** (${Object.entries(s.failover.failedOverBecause).map(([k, v]) => `${k} ${v}`).join(', ') || 'none'}), ` +
      `${s.failover.failedOverAndHeldAtB} of them ending with money at sandbox-b; first tried at sandbox-b (the split's pick, or sandbox-a's circuit open): ${s.failover.firstTriedAtB}. ` +
      `Held at: ${Object.entries(s.failover.heldAt).map(([k, v]) => `${k} ${v}`).join(', ') || 'none'}.`,
    '',
    '| attempts at | count |',
    '|---|---:|',
    ...rows(s.failover.attempts),
    '',
    `Saved cards: ${Object.values(s.savedCards.saving).reduce((n, v) => n + v, 0)} payments asked to save theirs (${Object.entries(s.savedCards.saving).map(([k, v]) => `${k} ${v}`).join(', ') || 'none'}); ` +
      `**${Object.values(s.savedCards.offSession).reduce((n, v) => n + v, 0)} off-session payments** of a saved card (${Object.entries(s.savedCards.offSession).map(([k, v]) => `${k} ${v}`).join(', ') || 'none'}), ` +
      `${s.savedCards.offSessionFailedOver} of them failed over from sandbox-a to sandbox-b.`,
    '',
    `Disputes: **${Object.values(s.disputes.byOutcome).reduce((n, v) => n + v, 0)}** on ${s.disputes.disputedPayments} payments, by final stage and status: ${Object.entries(s.disputes.byOutcome).map(([k, v]) => `${k} ${v}`).join(', ') || 'none'}; ` +
      `answered through the API: ${Object.entries(s.disputes.answers).map(([k, v]) => `${k} ${v}`).join(', ') || 'nothing'}; ${s.disputes.workflowRuns} dispute workflow runs.`,
    '',
    `Skipped (the same thing was already down): ${Object.entries(s.faultsSkipped).map(([k, v]) => `${k} ${v}`).join(', ') || 'none'}. ` +
      `Proxy: ${Object.entries(s.network).map(([k, v]) => `${k} ${v}`).join(', ')}. Worker kill points armed: ${s.workerKillPoints.filter(Boolean).join(', ') || 'none'}.`,
    '',
    '| check | passed | failed |',
    '|---|---:|---:|',
    ...Object.entries(s.checks).map(([name, c]) => `| ${name} | ${c.passed} | ${c.failed} |`),
    '',
    s.findings.length ? 'Findings:' : 'Findings: none.',
    ...s.findings.map((f) => `- ${f}`),
    '',
    `Census verdict: ${s.failed === 0 ? 'every check passed' : `${s.failed} checks failed`} (${s.passed} passed, ${s.failed} failed).`,
    '',
  ];
  return lines.join('\n');
}
