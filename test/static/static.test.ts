import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';

/** The code itself: strict types everywhere, and workflow code free of I/O (eslint.config.js). */
describe('static checks', () => {
  /** Its exit status and everything it printed. */
  const run = (command: string, args: string[]) =>
    new Promise<{ status: number; output: string }>((resolve) => {
      execFile(command, args, { encoding: 'utf8', timeout: 420_000, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
        const status = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ status, output: stdout + stderr });
      });
    });
  // Both start at once: each is single-threaded, and the machine has two cores. Generous
  // limits: beside four other files on two cores each took over 170 s in a CI run.
  const typecheck = run('npx', ['tsc', '-p', 'tsconfig.json']);
  const lint = run('npx', ['eslint', '.', '--max-warnings', '0']);

  it('typechecks in strict mode (tsc --noEmit)', async () => {
    const result = await typecheck;
    expect(result.output, 'tsc found errors').toBe('');
    expect(result.status).toBe(0);
  }, 450_000);

  it('lints clean: no I/O imports in workflows, no floating promises', async () => {
    const result = await lint;
    expect(result.output, 'eslint found problems').toBe('');
    expect(result.status).toBe(0);
  }, 450_000);
});
