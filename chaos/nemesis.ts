import { killPointNames } from '../lib/kill-points';
import type { Prng } from './prng';

export const faultKinds = [
  'kill-worker',
  'kill-api',
  'kill-relay',
  'kill-sandbox',
  'postgres-stop',
  'temporal-restart',
  'kill-temporal-node',
  'network-delay',
  'network-drop-responses',
  'network-reset',
  // Faults of sandbox-a alone (sandbox-b is never struck).
  'stall-sandbox',
  'network-partition',
  'outage-unavailable',
  'outage-down',
  'outage-declining',
  // Faults of the PSP double (chaos/environment.ts DOUBLE_PSP: its outage modes, POST /_sandbox/outage).
  'double-outage-unavailable',
  'double-outage-down',
  'double-lose-answers',
] as const;
export type FaultKind = (typeof faultKinds)[number];

/**
 * The kinds that strike sandbox-a, the first PSP of every tenant's route (the network kinds
 * act on its proxy): kill (SIGKILL, restarted after the fault's duration), stall (SIGSTOP,
 * SIGCONT after it), a full partition (every connection through its proxy cut), and its
 * outage modes (POST /_sandbox/outage): `unavailable` (writes refused, nothing done: the
 * payment moves to sandbox-b), `down` (nothing answers: outcomes unknown, the payment waits
 * for A), `declining` (every new charge declined with processing_error: moves to sandbox-b).
 */
export const pspFaultKinds: readonly FaultKind[] = [
  'kill-sandbox',
  'stall-sandbox',
  'network-partition',
  'outage-unavailable',
  'outage-down',
  'outage-declining',
  'network-delay',
  'network-drop-responses',
  'network-reset',
];

/**
 * The kinds that strike the PSP double (DOUBLE_PSP, the double of a kind that declares one), the
 * first PSP of the tenant `chaos-double` (chaos/environment.ts), by its outage modes (POST /_sandbox/outage): `unavailable` (503,
 * nothing done), `down` (nothing listening: connections refused, nothing sent, so a payment
 * moves on to sandbox-b), `lose-answers` (what was asked is done, then the connection dropped
 * before the answer: a lost answer). At a kind that resolves an unknown outcome by replaying the
 * request (`unknownOutcome: 'replay'`) a 503 or a lost answer leaves the outcome unknown, so the
 * payment keeps asking the double under its key; its circuit opens and new payments try
 * sandbox-b first. The double keeps its payments in memory, like a
 * PSP that never forgets them: it is never killed.
 */
export const doubleFaultKinds: readonly FaultKind[] = ['double-outage-unavailable', 'double-outage-down', 'double-lose-answers'];

/**
 * Which Temporal the run is on: `dev`, the dev server (one process, restarted whole by
 * `temporal-restart`), or `cluster`, the production server as two nodes behind the product's
 * frontend balancer (lib/frontend-balancer.ts; one node SIGKILLed at a time by `kill-temporal-node`).
 */
export type TemporalMode = 'dev' | 'cluster';
export const temporalModes: readonly TemporalMode[] = ['dev', 'cluster'];

/** The fault kinds a run on this Temporal draws from. */
export function faultKindsFor(mode: TemporalMode): FaultKind[] {
  return faultKinds.filter((kind) => kind !== (mode === 'cluster' ? 'temporal-restart' : 'kill-temporal-node'));
}

/** One fault: what, which instance (for the APIs and the cluster's nodes), and for how long it lasts or the thing stays down. */
export interface Fault {
  kind: FaultKind;
  target: number;
  durationMs: number;
  /** network-delay: each answer chunk waits this long. */
  delayMs?: number;
}

/** Faults struck at one moment (one or two at once), `atMs` after the load started. */
export interface NemesisEvent {
  atMs: number;
  faults: Fault[];
}

const weights: Record<FaultKind, number> = {
  'kill-worker': 3,
  'kill-api': 2,
  'kill-relay': 1.5,
  'kill-sandbox': 1.5,
  'postgres-stop': 1.5,
  'temporal-restart': 1,
  'kill-temporal-node': 2,
  'network-delay': 1.5,
  'network-drop-responses': 1.5,
  'network-reset': 1,
  'stall-sandbox': 1,
  'network-partition': 1,
  'outage-unavailable': 1.5,
  'outage-down': 1,
  'outage-declining': 1,
  'double-outage-unavailable': 1,
  'double-outage-down': 1,
  'double-lose-answers': 1,
};

function fault(rng: Prng, kind: FaultKind, apiCount: number): Fault {
  switch (kind) {
    case 'postgres-stop':
      return { kind, target: 0, durationMs: rng.int(2_000, 12_000) };
    case 'temporal-restart':
      return { kind, target: 0, durationMs: rng.int(0, 5_000) };
    case 'kill-temporal-node':
      // Which node dies, and how long it stays down before it starts again (its shards
      // move to the other node meanwhile, and back once it rejoins).
      return { kind, target: rng.int(0, 1), durationMs: rng.int(2_000, 20_000) };
    case 'network-delay':
      return { kind, target: 0, durationMs: rng.int(5_000, 20_000), delayMs: rng.int(500, 8_000) };
    case 'network-drop-responses':
    case 'network-reset':
    case 'network-partition':
    case 'stall-sandbox':
    case 'outage-unavailable':
    case 'outage-down':
    case 'outage-declining':
    case 'double-outage-unavailable':
    case 'double-outage-down':
    case 'double-lose-answers':
      return { kind, target: 0, durationMs: rng.int(5_000, 20_000) };
    default:
      // A killed process is restarted this long after it died.
      return { kind, target: kind === 'kill-api' ? rng.int(0, apiCount - 1) : 0, durationMs: rng.int(0, 4_000) };
  }
}

/**
 * The whole fault schedule, drawn from the seed before the run starts: the same seed gives
 * the same schedule. About one event in four strikes with two faults at once. Each kind in
 * `required` the draw left out is then added to an event the seed picks (so a short run
 * still strikes every one of them).
 */
export function faultSchedule(
  rng: Prng,
  options: { durationMs: number; gapMs: [number, number]; apiCount: number; temporal?: TemporalMode; required?: readonly FaultKind[] },
): NemesisEvent[] {
  const kinds = new Set(faultKindsFor(options.temporal ?? 'dev'));
  const modeWeights = Object.fromEntries(Object.entries(weights).filter(([kind]) => kinds.has(kind as FaultKind))) as Record<FaultKind, number>;
  const events: NemesisEvent[] = [];
  for (let at = rng.int(...options.gapMs) / 2; at < options.durationMs; at += rng.int(...options.gapMs)) {
    const first = rng.weighted(modeWeights);
    const faults = [fault(rng, first, options.apiCount)];
    if (rng.chance(0.25)) {
      const second = rng.weighted(modeWeights);
      const bothNetwork = first.startsWith('network') && second.startsWith('network');
      if (second !== first && !bothNetwork) faults.push(fault(rng, second, options.apiCount));
    }
    events.push({ atMs: Math.round(at), faults });
  }
  const drawn = new Set(events.flatMap((e) => e.faults.map((f) => f.kind)));
  for (const kind of options.required ?? []) {
    if (drawn.has(kind) || !kinds.has(kind) || events.length === 0) continue;
    rng.pick(events).faults.push(fault(rng, kind, options.apiCount));
  }
  return events;
}

/** CHAOS_KILL_AT for successive worker processes: two in five die at a named point on its n-th pass. */
export function killPointPlan(rng: Prng): () => string | null {
  return () => (rng.chance(0.4) ? `${rng.pick(killPointNames)}:${rng.int(1, 60)}` : null);
}

export function describeSchedule(events: NemesisEvent[]): string {
  return events
    .map((e) => `  +${(e.atMs / 1000).toFixed(1).padStart(6)} s  ${e.faults.map((f) => `${f.kind}${f.kind === 'kill-api' || f.kind === 'kill-temporal-node' ? `#${f.target}` : ''} ${f.durationMs} ms${f.delayMs ? ` (delay ${f.delayMs} ms)` : ''}`).join(' + ')}`)
    .join('\n');
}
