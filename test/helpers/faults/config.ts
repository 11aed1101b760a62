import path from 'node:path';
import { projectRoot } from '../../../devstack/temporal-cli';
import { DEFAULT_LOGS_DIR } from '../../../testkit/processes';

/**
 * How much each fault scenario repeats itself. Inside `npm run test:all` the defaults keep the
 * subset short; `npm run faults` (scripts/faults.ts) sets large counts through the
 * environment and then prints the table.
 */
function positiveInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value <= 0) throw new Error(`${name} must be a positive integer, got ${JSON.stringify(raw)}`);
  return value;
}

/** Trials per scenario (each crash scenario kills or stops something once per trial). */
export const FAULT_TRIALS = positiveInt('FAULT_TRIALS', 2);
/** Distinct keys stormed at once in one duplicate-storm round (50 identical requests each). */
export const FAULT_STORM_KEYS = positiveInt('FAULT_STORM_KEYS', 4);
/** Identical requests per key in a storm (docs/CONTRACT.md §9.4: duplicate storms). */
export const STORM_SIZE = 50;
/** How long the system has to go quiet after a fault ended (FAULT_QUIET_MS): an effect not shown by then counts as lost. */
export const QUIET_MS = positiveInt('FAULT_QUIET_MS', 120_000);

/** Where each scenario writes its figures; scripts/faults.ts points this at its own run directory. */
export const RESULTS_DIR = path.resolve(projectRoot, process.env.FAULT_RESULTS_DIR ?? 'test/artifacts/faults-subset');
/** Logs of the worker processes and servers the scenarios start and kill (FAULT_LOGS_DIR). */
export const LOGS_DIR = DEFAULT_LOGS_DIR;

/** A generous per-test timeout: `perTrialMs` for every trial on top of a fixed allowance (2 shared cores). */
export function scenarioTimeout(trials: number, perTrialMs: number, fixedMs = 180_000): number {
  return fixedMs + trials * perTrialMs;
}
