import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../devstack/temporal-cli';

/**
 * lib/kill-points.ts: the chaos run's hook. It kills the process with SIGKILL on the n-th
 * pass through the named point, and only when NODE_ENV=test: in production it is inert.
 */
function passFiveTimes(env: Record<string, string>) {
  const script = `import { killPoint } from ${JSON.stringify(path.join(projectRoot, 'lib/kill-points.ts'))};
for (let i = 1; i <= 5; i++) { killPoint('after-record-commit'); console.log('passed', i); }`;
  return spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: projectRoot,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    encoding: 'utf8',
  });
}

describe('kill points', () => {
  it('SIGKILLs the process on the n-th pass through the armed point', () => {
    const run = passFiveTimes({ NODE_ENV: 'test', CHAOS_KILL_AT: 'after-record-commit:3' });
    expect(run.signal).toBe('SIGKILL');
    expect(run.stdout.trim().split('\n')).toEqual(['passed 1', 'passed 2']);
  });

  it('is inert for another point, and outside NODE_ENV=test', () => {
    for (const env of [
      { NODE_ENV: 'test', CHAOS_KILL_AT: 'after-provider-answer:1' },
      { NODE_ENV: 'production', CHAOS_KILL_AT: 'after-record-commit:1' },
    ]) {
      const run = passFiveTimes(env);
      expect(run.signal).toBeNull();
      expect(run.status).toBe(0);
      expect(run.stdout.trim().split('\n')).toHaveLength(5);
    }
  });
});
