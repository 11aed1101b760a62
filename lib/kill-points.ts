/**
 * Named points where a chaos run (chaos/) kills the worker process with SIGKILL, so a
 * crash lands exactly where it hurts most: right after a record step's transaction
 * committed (ledger posting and event included) but before Temporal heard of it, or right
 * after the provider answered but before the answer was recorded, or (the API) right after a
 * payment's claim and intent committed but before its run was started.
 *
 * Inert unless NODE_ENV=test and CHAOS_KILL_AT=<point>[:<n>] are both set: the process
 * then dies the n-th time (default 1st) it passes that point. Production never sets them.
 */
export const killPointNames = ['after-record-commit', 'after-provider-answer', 'after-claim-commit'] as const;
export type KillPointName = (typeof killPointNames)[number];

function armedPoint(): { name: string; at: number } | null {
  const spec = process.env.NODE_ENV === 'test' ? process.env.CHAOS_KILL_AT : undefined;
  if (!spec) return null;
  const [name, at] = spec.split(':');
  return { name: name!, at: Number(at ?? 1) || 1 };
}

const armed = armedPoint();
let passes = 0;

export function killPoint(name: KillPointName): void {
  if (armed?.name !== name) return;
  if (++passes >= armed.at) process.kill(process.pid, 'SIGKILL');
}
