import type { ChildProcess } from 'node:child_process';

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** Tracks the exit of any child process, including ones spawned by a library. */
export function watchExit(child: ChildProcess): { exited: Promise<ExitInfo>; hasExited: () => boolean } {
  let done = child.exitCode !== null || child.signalCode !== null;
  const exited = done
    ? Promise.resolve({ code: child.exitCode, signal: child.signalCode })
    : new Promise<ExitInfo>((resolve) =>
        child.once('exit', (code, signal) => {
          done = true;
          resolve({ code, signal });
        }),
      );
  return { exited, hasExited: () => done };
}

