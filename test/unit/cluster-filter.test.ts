import { describe, expect, it } from 'vitest';
import { runIncludesClusterTests } from '../global-setup';

// The global setup builds the production server's binaries (minutes on a fresh machine) only
// for a run that includes test/cluster/: `npm test` (project quick) must not pay for them,
// `npm run test:all` must.
describe('runIncludesClusterTests', () => {
  it('is true for a run of every project, and false when --project picks only projects without cluster files', () => {
    expect(runIncludesClusterTests(['run'])).toBe(true);
    expect(runIncludesClusterTests(['run', '--project', 'quick', '--no-isolate'])).toBe(false);
    expect(runIncludesClusterTests(['run', '--project=quick'])).toBe(false);
    expect(runIncludesClusterTests(['run', '--project', 'quick', '--project', 'slow'])).toBe(true);
    expect(runIncludesClusterTests(['run', '--project', 'alone'])).toBe(true);
    expect(runIncludesClusterTests(['run', '--project', 'sl*'])).toBe(true);
  });

  it('follows file filters: a cluster file or folder is included, an option\'s value is not a filter', () => {
    expect(runIncludesClusterTests(['run', 'test/cluster/mtls.test.ts'])).toBe(true);
    expect(runIncludesClusterTests(['run', 'cluster'])).toBe(true);
    expect(runIncludesClusterTests(['run', 'test/unit'])).toBe(false);
    expect(runIncludesClusterTests(['run', '-t', 'test/cluster', 'test/unit'])).toBe(false);
    expect(runIncludesClusterTests(['run', '--project', 'quick', 'test/cluster/mtls.test.ts'])).toBe(false);
  });
});
