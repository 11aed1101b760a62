import { IllegalStateError } from '@temporalio/common';
import { freePort } from '../../devstack/ports';
import { createLogger } from '../../lib/logger';
import { installTemporalRuntime } from '../../worker/observability';

/**
 * The Temporal SDK's runtime of a test process, and the logs tests read. The SDK allows one
 * runtime per process, made by whatever first needs it; `npm test` runs many files one after
 * another in each process (vitest `--no-isolate`), so the runtime is installed here: by the
 * setup file (test/helpers/setup.ts) before any file's code under `npm test`, otherwise by the
 * helpers that start workers (the test stack, the workflow worker, the replay test). Its logger is the one test logger: every line of API, worker, workflow and activity, kept
 * only while a test captures them (captureLogs). The state sits on globalThis: it must outlive
 * one file's copy of this module.
 */
interface TestRuntimeState {
  lines: string[];
  capturing: boolean;
  installed: Promise<void> | undefined;
}
const stateKey = Symbol.for('payments.test-runtime');
const shared = globalThis as { [stateKey]?: TestRuntimeState };
const state: TestRuntimeState = (shared[stateKey] ??= { lines: [], capturing: false, installed: undefined });

export const testLogger = createLogger({
  name: 'test',
  level: 'debug',
  destination: { write: (line: string) => void (state.capturing && state.lines.push(line)) },
});

/**
 * Installs this process's runtime once; later calls wait for the first. In a process per file,
 * a file that made a worker before its first stack already has the SDK's default runtime: it
 * keeps it (its logs are then not captured), as before the tiers.
 */
export function installTestRuntime(): Promise<void> {
  state.installed ??= freePort().then((port) => {
    try {
      installTemporalRuntime(testLogger, `127.0.0.1:${port}`);
    } catch (error) {
      if (!(error instanceof IllegalStateError)) throw error;
    }
  });
  return state.installed;
}

/** Starts keeping log lines; `lines()` returns them parsed. */
export function captureLogs() {
  state.lines.length = 0;
  state.capturing = true;
  return {
    lines: () => state.lines.map((line) => JSON.parse(line) as Record<string, unknown>),
    text: () => state.lines.join(''),
    stop: () => void (state.capturing = false),
  };
}
