import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { projectRoot } from './temporal-cli';
import { pipeLines } from './output';
import { watchExit, type ExitInfo } from './process-exit';

export { watchExit, type ExitInfo };

/** The tsx ESM loader, so children run TypeScript with a plain `node` (one process each, no wrapper). */
export const tsxLoader = import.meta.resolve('tsx');
const exitWithParent = import.meta.resolve('./exit-with-parent.mjs');

export interface ManagedChild {
  name: string;
  process: ChildProcess;
  pid: number;
  /** Resolves when the process has exited, however it ended. */
  exited: Promise<ExitInfo>;
  hasExited(): boolean;
  /** SIGTERM, then SIGKILL once `graceMs` have passed; resolves on exit. */
  stop(graceMs: number): Promise<ExitInfo>;
  kill(): void;
}

/** Sends `signal`, then SIGKILL after `graceMs` unless the process has exited by then. */
export async function stopProcess(child: ChildProcess, exited: Promise<ExitInfo>, hasExited: () => boolean, graceMs: number, signal: NodeJS.Signals = 'SIGTERM'): Promise<ExitInfo> {
  if (hasExited()) return exited;
  child.kill(signal);
  const timer = setTimeout(() => {
    if (!hasExited()) child.kill('SIGKILL');
  }, graceMs);
  const info = await exited;
  clearTimeout(timer);
  return info;
}

/**
 * Runs a TypeScript entry point of the project (`api/main.ts`, ...) as `node --import tsx`,
 * with its output prefixed by `[name] `.
 */
export function spawnService(name: string, entry: string, env: NodeJS.ProcessEnv): ManagedChild {
  const child = spawn(process.execPath, ['--import', tsxLoader, '--import', exitWithParent, path.join(projectRoot, entry)], {
    cwd: projectRoot,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (child.pid === undefined) throw new Error(`could not start the ${name} process`);
  pipeLines(child.stdout, name, process.stdout);
  pipeLines(child.stderr, name, process.stderr);
  const { exited, hasExited } = watchExit(child);
  return {
    name,
    process: child,
    pid: child.pid,
    exited,
    hasExited,
    stop: (graceMs) => stopProcess(child, exited, hasExited, graceMs),
    kill: () => {
      if (!hasExited()) child.kill('SIGKILL');
    },
  };
}

export function describeExit({ code, signal }: ExitInfo): string {
  return signal ? `killed by ${signal}` : `exit code ${code}`;
}
