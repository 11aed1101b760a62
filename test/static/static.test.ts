import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { ESLint } from 'eslint';

/** The code itself: strict types everywhere, workflow code free of I/O, the folders' layers and no import circles (eslint.config.js). */
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
  // limits: beside four other files on two cores each can take over 170 s.
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

  /** The layers and the circle rule refuse what they are there to refuse (a file's text linted as if it stood at that path). */
  it('refuses an import that runs up a layer, and one that closes a circle', async () => {
    const eslint = new ESLint();
    const messages = async (filePath: string, code: string) => (await eslint.lintText(code, { filePath }))[0]!.messages.map((m) => `${m.ruleId}: ${m.message}`);

    const upward = await messages('lib/logger.ts', "import { createApp } from '../api/app';\nexport const app = createApp;\n");
    expect(upward).toContainEqual(expect.stringMatching(/^@typescript-eslint\/no-restricted-imports: .*Layers \(eslint\.config\.js\): lib\/ imports only from domain\/, shared\//));

    const fromTheGround = await messages('domain/money.ts', "import { paymentStatuses } from '../shared/payments';\nexport const statuses = paymentStatuses;\n");
    expect(fromTheGround).toContainEqual(expect.stringMatching(/domain\/ is the ground/));

    // Inside one folder: bench/load.ts imports bench/pgactivity.ts, which imports bench/common.ts.
    const circle = await messages('bench/common.ts', "import type { HttpClient } from './load';\nexport type Client = HttpClient;\n");
    expect(circle).toContain('layers/no-import-cycle: Import circle: bench/common.ts → bench/load.ts → bench/pgactivity.ts → bench/common.ts. Move what both sides need into a module they both import.');

    expect(await messages('bench/common.ts', "import type { Sql } from '../db/connect';\nexport type Db = Sql;\n")).toEqual([]);
  }, 450_000);
});
