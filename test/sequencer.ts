import { statSync } from 'node:fs';
import path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Longest files first. The suite's wall time is bounded below by its longest file (the
 * two-minute chaos run), so that file and the other long ones must start at once, not last:
 * vitest without its cache (a fresh clone, as in CI) orders by file size, which put the
 * chaos run near the end. Seconds are from a full run on the CI machine (2 cores; see
 * README, "Tests"); only their order matters, and a file not listed is placed by its size
 * (about 1 s per 4 KB, as the small files measure) among them.
 */
export const measuredSeconds: Record<string, number> = {
  'test/chaos/chaos.test.ts': 150,
  'test/cluster/cluster.test.ts': 120,
  'test/cluster/postgres-restart.test.ts': 90,
  'test/cluster/mtls.test.ts': 70,
  'test/faults/expiry-retention.test.ts': 53,
  'test/integration/fail-closed.test.ts': 47,
  'test/faults/relay-crash.test.ts': 46,
  'test/faults/postgres-outage.test.ts': 43,
  'test/faults/worker-crash.test.ts': 33,
  'test/integration/start.test.ts': 30,
  'test/unit/static.test.ts': 27,
};

export function expectedSeconds(file: string, root: string): number {
  const relative = path.relative(root, file).split(path.sep).join('/');
  return measuredSeconds[relative] ?? statSync(file).size / 4096;
}

export default class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const weight = new Map(files.map((spec) => [spec, expectedSeconds(spec.moduleId, root)]));
    return [...files].sort((a, b) => weight.get(b)! - weight.get(a)! || a.moduleId.localeCompare(b.moduleId));
  }
}
