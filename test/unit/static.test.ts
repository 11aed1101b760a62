import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';

/** The code itself: strict types everywhere, and workflow code free of I/O (eslint.config.js). */
describe('static checks', () => {
  const run = (command: string, args: string[]) => spawnSync(command, args, { encoding: 'utf8', timeout: 170_000 });

  it('typechecks in strict mode (tsc --noEmit)', () => {
    const result = run('npx', ['tsc', '-p', 'tsconfig.json']);
    expect(result.stdout + result.stderr, 'tsc found errors').toBe('');
    expect(result.status).toBe(0);
  }, 180_000);

  it('lints clean: no I/O imports in workflows, no floating promises', () => {
    const result = run('npx', ['eslint', '.', '--max-warnings', '0']);
    expect(result.stdout + result.stderr, 'eslint found problems').toBe('');
    expect(result.status).toBe(0);
  }, 180_000);
});
