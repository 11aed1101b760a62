import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { projectRoot } from '../devstack/temporal-cli';

const dieWithParent = fileURLToPath(new URL('../devstack/exit-with-parent.mjs', import.meta.url));

const living = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of living) child.kill('SIGKILL');
});

/** One of the product's processes (API, sandbox, relay) that the nemesis may SIGKILL and restart. */
export interface Service {
  name: string;
  pid: number;
  exited(): boolean;
  /** Resolves when the process is gone. */
  whenExited: Promise<void>;
  kill(): Promise<void>;
  stop(graceMs?: number): Promise<void>;
}

/**
 * Spawns `node --import tsx <script>` with the environment given and waits until `readyUrl`
 * answers 2xx. Output is appended to `<logsDir>/<name>.log`.
 */
export async function spawnService(options: {
  name: string;
  script: string;
  env: Record<string, string>;
  readyUrl: string;
  logsDir: string;
  readyTimeoutMs?: number;
}): Promise<Service> {
  mkdirSync(options.logsDir, { recursive: true });
  const logFile = path.join(options.logsDir, `${options.name}.log`);
  const out = openSync(logFile, 'a');
  const child = spawn(process.execPath, ['--import', 'tsx', '--import', dieWithParent, path.join(projectRoot, options.script)], {
    cwd: projectRoot,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, EXIT_WITH_PARENT_SIGNAL: 'SIGKILL', NODE_ENV: 'test', LOG_LEVEL: 'warn', ...options.env },
    stdio: ['ignore', out, out],
  });
  closeSync(out);
  if (child.pid === undefined) throw new Error(`could not spawn ${options.name}`);
  living.add(child);
  let exited = false;
  const whenExited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      exited = true;
      living.delete(child);
      resolve();
    }),
  );
  const deadline = Date.now() + (options.readyTimeoutMs ?? 120_000);
  for (;;) {
    if (exited) throw new Error(`${options.name} exited during start-up (see ${logFile})`);
    const ready = await fetch(options.readyUrl, { signal: AbortSignal.timeout(2000) }).then((r) => r.ok, () => false);
    if (ready) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`${options.name} not ready within the time allowed (see ${logFile})`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    name: options.name,
    pid: child.pid,
    exited: () => exited,
    whenExited,
    async kill() {
      if (!exited) child.kill('SIGKILL');
      await whenExited;
    },
    async stop(graceMs = 10_000) {
      if (exited) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await whenExited;
      clearTimeout(timer);
    },
  };
}
