/**
 * `npm run bench -- routing-store`: what success-rate routing costs on a payment's live path, on
 * the local PostgreSQL, without Temporal (docs/routing-and-waits.md). Per payment the workflow
 * will make one decideRoute (read the candidates' counts and health at the segment's levels, one
 * statement, then the pure decision) and one recordRouteOutcome per first attempt (one UPSERT
 * over the segment's four levels and the PSP's health); the shared call limit is one UPSERT per
 * PSP call. Each is timed alone, one client after another, and under concurrent clients on one
 * hot segment (every payment's rows the same: the worst case for the row locks).
 *
 * Options: --payments N (default 2000 per client count), --clients "1,8" (default), --out DIR
 * (default bench/results). Writes routing-store.json and routing-store.md there. It makes its
 * own database (routing_store_bench, dropped and made again) and migrates it.
 */
import { performance } from 'node:perf_hooks';
import type { Sql } from '../db/connect';
import { readEstimates, recordOutcome, takeCall } from '../db/routing';
import { createRouteDecisionSteps } from '../activities/routing-decision';
import { decideSuccessRate, SUCCESS_RATE_DEFAULTS } from '../domain/routing-success-rate';
import { seeded } from './routing-sim/sim';
import { freshDatabase, option, percentiles, writeResults } from './common';

const DATABASE = 'routing_store_bench';
const PROVIDERS = ['psp-a', 'psp-b', 'psp-c'];
const RATES = [0.9, 0.8, 0.7];
const segment = { network: 'visa', currency: 'EUR', methodType: 'card' };


type Operation = 'readEstimates' | 'decision (pure)' | 'recordOutcome' | 'recordRouteOutcome (async commit)' | 'decideRoute (activity)' | 'takeCall';

/** `payments` payments split over `clients` concurrent clients, each timing every operation it makes. */
async function round(sql: Sql, payments: number, clients: number): Promise<Record<Operation, number[]>> {
  const samples: Record<Operation, number[]> = { readEstimates: [], 'decision (pure)': [], recordOutcome: [], 'recordRouteOutcome (async commit)': [], 'decideRoute (activity)': [], takeCall: [] };
  const steps = createRouteDecisionSteps({ sql, providerNames: PROVIDERS, callLimits: { 'psp-a': { perSecond: 1_000_000, burst: 1_000_000 } } });
  const tenantId = `ten_bench_${clients}`;
  await sql`INSERT INTO tenants (id, name, api_key_hash, api_key_prefix, webhook_secret, routing)
            VALUES (${tenantId}, 'bench', ${Buffer.alloc(32, clients)}, 'pk_bench', 'whsec_bench', ${sql.json({ strategy: 'success_rate' })}) ON CONFLICT (id) DO NOTHING`;
  const time = async <T>(operation: Operation, run: () => Promise<T> | T): Promise<T> => {
    const started = performance.now();
    const result = await run();
    samples[operation].push(performance.now() - started);
    return result;
  };
  await Promise.all(
    Array.from({ length: clients }, async (_, client) => {
      const random = seeded(1000 + client);
      for (let i = client; i < payments; i += clients) {
        const estimates = await time('readEstimates', () => readEstimates(sql, { scope: '', providers: PROVIDERS, segment }));
        const decision = await time('decision (pure)', () => decideSuccessRate({ candidates: PROVIDERS, segment, counts: estimates.counts, uniform: random() }));
        await time('decideRoute (activity)', () => steps.decideRoute({ paymentId: `pay_${clients}_${i}`, tenantId, amountMinor: 1000, currency: 'EUR', paymentMethod: 'pm_card_visa', segment }));
        await time('takeCall', () => takeCall(sql, 'psp-a', { perSecond: 1_000_000, burst: 1_000_000 }));
        const approved = random() < RATES[PROVIDERS.indexOf(decision.chosen)]!;
        await time('recordOutcome', () => recordOutcome(sql, { provider: decision.chosen, segment, outcome: approved ? 'approved' : 'declined', firstAttempt: true }));
        await time('recordRouteOutcome (async commit)', () => steps.recordRouteOutcome({ provider: decision.chosen, segment, outcome: approved ? 'approved' : 'declined', firstAttempt: true, tenantScope: null }));
      }
    }),
  );
  return samples;
}

export async function runRoutingStoreBench(args: readonly string[]): Promise<void> {
  const payments = Number(option(args, '--payments', '2000'));
  const clientCounts = option(args, '--clients', '1,8').split(',').map(Number);
  const out = option(args, '--out', 'bench/results');
  const sql = await freshDatabase(DATABASE, Math.max(...clientCounts) + 2);
  const rounds: { clients: number; seconds: number; operations: Record<string, ReturnType<typeof percentiles>> }[] = [];
  try {
    // Warm-up: connections, plans, the rows.
    await round(sql, 200, 1);
    for (const clients of clientCounts) {
      const started = performance.now();
      const samples = await round(sql, payments, clients);
      rounds.push({ clients, seconds: Math.round((performance.now() - started) / 10) / 100, operations: Object.fromEntries(Object.entries(samples).map(([name, s]) => [name, percentiles(s)])) });
    }
    const [{ rows } = { rows: 0 }] = await sql<{ rows: number }[]>`SELECT count(*)::int AS rows FROM routing_outcomes`;
    const results = { payments, clientCounts, rounds, routingOutcomeRows: rows, settings: SUCCESS_RATE_DEFAULTS, node: process.version, postgres: (await sql<{ server_version: string }[]>`SHOW server_version`.then((r) => r[0]?.server_version)) ?? null };
    writeResults(out, 'routing-store', results, report(results));
  } finally {
    await sql.end();
  }
}

function report(results: { payments: number; rounds: { clients: number; seconds: number; operations: Record<string, ReturnType<typeof percentiles>> }[]; routingOutcomeRows: number; postgres: string | null; node: string }): string {
  const lines = [
    '# Routing store: the decision\'s live-path cost',
    '',
    `\`npm run bench -- routing-store\` (bench/routing-store.ts): ${results.payments} payments per client count on the local PostgreSQL ${results.postgres ?? ''}, Node ${results.node}, no Temporal; 3 PSPs, one hot segment (visa:EUR:card: every payment's rows the same, the worst case for row locks). Each payment reads the estimates, decides (pure), runs the whole decideRoute activity (the tenant's routing, the estimates and health, the decision), takes a call of a limited PSP, and records its outcome twice: \`recordOutcome\` waiting for the WAL flush, and the activity \`recordRouteOutcome\`, which commits without waiting for it (synchronous_commit off for its own statement). Milliseconds per operation; the machine is shared (2 cores), so these are upper bounds of what a quiet machine shows.`,
    '',
    '| clients | operation | n | p50 | p90 | p99 | max |',
    '|---|---|---|---|---|---|---|',
  ];
  for (const r of results.rounds) for (const [name, p] of Object.entries(r.operations)) lines.push(`| ${r.clients} | ${name} | ${p.n} | ${p.p50} | ${p.p90} | ${p.p99} | ${p.max} |`);
  lines.push('', `Rows in routing_outcomes after the run: ${results.routingOutcomeRows} (3 PSPs × 4 levels × 1 scope: bounded, one per key).`, '');
  return lines.join('\n');
}
