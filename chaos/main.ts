/**
 * npm run chaos -- --minutes M --seed S [--clients N] [--gap MIN-MAX] [--temporal dev|cluster]
 *
 * Randomized faults under a mixed load over three PSPs, two sandboxes and a PSP double
 * (the nemesis strikes sandbox-a and the double, never sandbox-b), then the checker (chaos/run.ts). Prints the seed and its fault schedule first, the
 * verdict last (`N passed, N failed`); exits 1 on any finding. Results: --results (default
 * chaos/results/: census.json.gz, summary.json, summary.md); logs: test/artifacts/chaos-logs/.
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { projectRoot } from '../devstack/temporal-cli';
import { temporalModes, type TemporalMode } from './nemesis';
import { DOUBLE_PSP } from './environment';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '30' },
    seed: { type: 'string' },
    clients: { type: 'string', default: '6' },
    /** Seconds between two fault events, drawn in this range. */
    gap: { type: 'string', default: '15-45' },
    results: { type: 'string', default: 'chaos/results' },
    /** dev: the dev server (fault temporal-restart); cluster: two production nodes (fault kill-temporal-node). */
    temporal: { type: 'string', default: process.env.TEMPORAL_MODE ?? 'dev' },
  },
});
const minutes = Number(values.minutes);
const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed);
const clients = Number(values.clients);
const gapMs = values.gap.split('-').map((s) => Number(s) * 1000) as [number, number];
const temporal = values.temporal as TemporalMode;
if (!temporalModes.includes(temporal) || !(minutes > 0) || !Number.isInteger(seed) || seed < 0 || !(clients > 0) || gapMs.length !== 2 || !(gapMs[0] > 0) || !(gapMs[1] >= gapMs[0])) {
  console.error('usage: npm run chaos -- --minutes M --seed S [--clients N] [--gap MIN-MAX] [--temporal dev|cluster]  (M > 0, S a non-negative integer, gap in seconds; --temporal defaults to TEMPORAL_MODE, else dev)');
  process.exit(2);
}
const logsDir = path.join(projectRoot, 'test', 'artifacts', 'chaos-logs');
const { runChaos } = await import('./run');
const { summary } = await runChaos({ minutes, seed, clients, gapMs, temporal, resultsDir: path.resolve(projectRoot, values.results), logsDir });
for (const finding of summary.findings) console.log(`FINDING ${finding}`);
console.log(`written: ${values.results}/summary.md, summary.json, census.json.gz`);
console.log(`seed ${seed}: ${summary.payments} payments, ${summary.refunds} refunds, faults ${JSON.stringify(summary.faultsInjected)}`);
console.log(`three PSPs: ${summary.failover.failedOver} payments failed over from sandbox-a to sandbox-b; faults on sandbox-a ${JSON.stringify(summary.faultsOnSandboxA)}, on ${DOUBLE_PSP} ${JSON.stringify(summary.faultsOnDouble)}; held at ${JSON.stringify(summary.failover.heldAt)}`);
console.log(`saved cards: ${Object.values(summary.savedCards.offSession).reduce((n, v) => n + v, 0)} off-session payments (${JSON.stringify(summary.savedCards.offSession)}), ${summary.savedCards.offSessionFailedOver} failed over`);
console.log(`${summary.passed} passed, ${summary.failed} failed`);
process.exit(summary.failed > 0 ? 1 : 0);
