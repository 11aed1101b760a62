import { statSync } from 'node:fs';
import path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Longest files first, within each group of projects (vitest.config.ts; the chaos run is in
 * `alone`, after the rest). A group's wall time is bounded below by its longest file, so the
 * long ones must start early, not last:
 * vitest without its cache (a fresh clone, as in CI) orders by file size, which put the
 * chaos run and test/replay/replay-script.test.ts (a small file that runs a script five
 * times) at the end. Seconds are from full runs on a quiet machine;
 * only their order matters. A file not listed is placed by its
 * size (about 1 s per 1 KB, as the unlisted files measure) among them.
 */
export const measuredSeconds: Record<string, number> = {
  // The whole suite (npm run test:all), as measured with four files at a time before the
  // tiers. The cluster's scale-out and rolling upgrade are not here: they run alone, after
  // everything else (vitest.config.ts runAlone).
  'test/chaos/chaos.test.ts': 153,
  // Measured alone on a busy 2-core machine (58-69 s), not in a full run: two kills, each waiting out a workflow task's timeout, four worker processes.
  'test/faults/command-after-crash.test.ts': 58,
  'test/faults/postgres-outage.test.ts': 53,
  'test/cluster/cluster.test.ts': 52,
  'test/faults/relay-crash.test.ts': 47,
  'test/faults/fail-closed.test.ts': 43,
  'test/static/static.test.ts': 40,
  'test/faults/expiry-retention.test.ts': 38,
  'test/faults/worker-crash.test.ts': 32,
  'test/faults/lost-response.test.ts': 26,
  'test/faults/temporal-outage.test.ts': 24,
  'test/launch/start.test.ts': 22,
  'test/cluster/postgres-restart.test.ts': 19,
  'test/chaos/quiet.test.ts': 11,
  'test/faults/storms.test.ts': 7,
  'test/launch/start-closed-folder.test.ts': 7,
  'test/integration/idempotency.test.ts': 17,
  'test/replay/replay-script.test.ts': 15,
  'test/integration/edge.test.ts': 8,
  'test/workflows/payments.test.ts': 8,
  'test/integration/lifecycle.test.ts': 7,
};

/**
 * Under `npm test` (TEST_SHARED_PROCESSES=1: the quick suite, one process for many files) its
 * own measured seconds, three files at a time on a quiet machine: 206–208 s.
 * The whole suite keeps the table above: with the quick files' seconds in it too, that order
 * can put the cluster's rolling upgrade beside other heavy files, where it starves (hundreds
 * of 503s under load).
 */
export const quickSuiteSeconds: Record<string, number> = {
  'test/integration/waiting-races.test.ts': 36,
  'test/integration/schedules.test.ts': 34,
  'test/integration/failover.test.ts': 29,
  'test/integration/idempotency.test.ts': 28,
  'test/replay/replay-script.test.ts': 24,
  'test/workflows/payments.test.ts': 20,
  'test/integration/waiting-payments.test.ts': 20,
  'test/integration/lifecycle.test.ts': 20,
  'test/integration/listeners.test.ts': 17,
  'test/browser/temporal-ui.test.ts': 16,
  'test/workflows/payments-waits.test.ts': 15,
  'test/replay/histories.test.ts': 14,
  'test/integration/optional-bodies.test.ts': 14,
  'test/integration/fuzz.test.ts': 14,
  'test/client/client-stack.test.ts': 14,
  'test/integration/intent-in-claim.test.ts': 12,
  'test/integration/sandbox-flows.test.ts': 12,
  'test/integration/edge.test.ts': 11,
  'test/integration/worker-shutdown.test.ts': 9,
};

/**
 * Started last, whatever their length: test/cluster/mtls.test.ts runs a second two-node
 * cluster on the machine's PostgreSQL (26 connections each, devstack/temporal-cluster.ts);
 * next to test/cluster/cluster.test.ts's, with the other files' stacks, the two took all 100
 * of its connections (test/helpers/cluster.ts also makes them take turns).
 */
export const startedLast = new Set(['test/cluster/mtls.test.ts']);

export function expectedSeconds(file: string, root: string): number {
  const relative = path.relative(root, file).split(path.sep).join('/');
  if (startedLast.has(relative)) return -1;
  const seconds = process.env.TEST_SHARED_PROCESSES === '1' ? quickSuiteSeconds : measuredSeconds;
  return seconds[relative] ?? statSync(file).size / 1024;
}

export default class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const weight = new Map(files.map((spec) => [spec, expectedSeconds(spec.moduleId, root)]));
    return [...files].sort((a, b) => weight.get(b)! - weight.get(a)! || a.moduleId.localeCompare(b.moduleId));
  }
}
