import type { Logger } from '../lib/logger';
import type { WorkerMetrics } from '../lib/metrics';
import { orderWithHealth, type CircuitState, type ProviderHealthView } from '../domain/routing';

export { orderWithHealth, type CircuitState, type ProviderHealthView };

/**
 * A circuit breaker per PSP (docs/CONTRACT.md §3.7), in the worker's memory: each
 * worker process judges the PSPs by the calls it made itself.
 *
 * - closed: calls go through; every outcome is counted over a sliding window. When the window
 *   holds at least `minCalls` outcomes and at least `errorRate` of them are errors, it opens.
 * - open: for `openMs`, new payments try this provider last (order()); it is never dropped, so
 *   when every provider is open the routing's own order stands.
 * - half-open: after the cool-down, up to `probes` new payments at a time try it first again
 *   (a probe is one order() that put it first; it is released by its outcome, or after
 *   `probeTimeoutMs` if none comes). A probe's success closes the circuit; its failure opens it
 *   again for another cool-down. Outcomes of calls begun before (still in flight while it was
 *   open) do not move it.
 *
 * What counts as an error is the caller's to say: the PSP unreachable, timing out or answering
 * 5xx, not a card decline (a decline is the PSP working).
 */
export interface BreakerSettings {
  /** The sliding window outcomes are counted over. */
  windowMs: number;
  /** Fewer outcomes than this in the window never open the circuit. */
  minCalls: number;
  /** The share of errors in the window that opens it (0 < rate ≤ 1). */
  errorRate: number;
  /** How long it stays open before probes are let through. */
  openMs: number;
  /** Probes in flight at once while half-open. */
  probes: number;
  /** A probe whose outcome never came is forgotten after this. */
  probeTimeoutMs: number;
}

export const defaultBreakerSettings: BreakerSettings = { windowMs: 30_000, minCalls: 5, errorRate: 0.5, openMs: 30_000, probes: 1, probeTimeoutMs: 60_000 };

/** The gauge's value per state (`provider_circuit_state`). */
export const circuitStateValue: Record<CircuitState, number> = { closed: 0, half_open: 1, open: 2 };

interface Circuit {
  state: CircuitState;
  /** Outcomes in the window, oldest first (closed only). */
  outcomes: { at: number; error: boolean }[];
  openedAt: number;
  /** When each probe in flight was let through (half-open only). */
  probes: number[];
}

export interface ProviderHealthOptions {
  settings?: Partial<BreakerSettings>;
  /** Milliseconds since the epoch; injectable for tests. */
  now?: () => number;
  metrics?: Pick<WorkerMetrics, 'providerCircuitState' | 'providerCircuitTransitions' | 'providerCircuitRefreshers'>;
  logger?: Logger;
  /** Providers known from the start (shown as closed on /metrics before any call). */
  providers?: readonly string[];
}

export class ProviderHealth implements ProviderHealthView {
  readonly settings: BreakerSettings;
  private readonly circuits = new Map<string, Circuit>();
  private readonly now: () => number;

  constructor(private readonly options: ProviderHealthOptions = {}) {
    this.settings = { ...defaultBreakerSettings, ...options.settings };
    if (!(this.settings.errorRate > 0 && this.settings.errorRate <= 1)) throw new Error(`errorRate must be in (0, 1], not ${this.settings.errorRate}`);
    if (this.settings.minCalls < 1 || this.settings.probes < 1) throw new Error('minCalls and probes are at least 1');
    this.now = options.now ?? Date.now;
    for (const provider of options.providers ?? []) this.circuit(provider);
    // A scrape sees an open circuit whose cool-down ended as half-open, even if no payment asked since.
    options.metrics?.providerCircuitRefreshers.add(() => this.refresh());
  }

  /** Counts one call's outcome. */
  record(provider: string, outcome: 'ok' | 'error'): void {
    const circuit = this.circuit(provider);
    const now = this.now();
    this.advance(provider, circuit, now);
    if (circuit.state === 'open') return; // a call begun before it opened
    if (circuit.state === 'half_open') {
      if (circuit.probes.length === 0) return; // not a probe's outcome
      circuit.probes.shift();
      if (outcome === 'ok') this.transition(provider, circuit, 'closed', now, 'a probe succeeded');
      else this.transition(provider, circuit, 'open', now, 'a probe failed');
      return;
    }
    circuit.outcomes.push({ at: now, error: outcome === 'error' });
    this.prune(circuit, now);
    const calls = circuit.outcomes.length;
    const errors = circuit.outcomes.filter((o) => o.error).length;
    if (calls >= this.settings.minCalls && errors / calls >= this.settings.errorRate) {
      this.transition(provider, circuit, 'open', now, `${errors} errors in ${calls} calls within ${this.settings.windowMs / 1000} s`);
    }
  }

  /** The provider's state now (an unknown provider is closed). */
  state(provider: string): CircuitState {
    const circuit = this.circuits.get(provider);
    if (!circuit) return 'closed';
    this.advance(provider, circuit, this.now());
    return circuit.state;
  }

  /**
   * The candidates with the providers that should not be tried first moved to the end, in
   * their order: open ones, and half-open ones with no probe free. Nothing is dropped. A
   * half-open provider that stays first takes a probe.
   */
  order(candidates: readonly string[]): string[] {
    const now = this.now();
    const usable: string[] = [];
    const last: string[] = [];
    for (const provider of candidates) {
      const circuit = this.circuits.get(provider);
      if (!circuit) {
        usable.push(provider);
        continue;
      }
      this.advance(provider, circuit, now);
      if (circuit.state === 'closed') usable.push(provider);
      else if (circuit.state === 'half_open' && usable.length === 0 && circuit.probes.length < this.settings.probes) {
        circuit.probes.push(now);
        usable.push(provider);
      } else if (circuit.state === 'half_open' && usable.length > 0) usable.push(provider); // a fallback behind a healthy one: no probe taken
      else last.push(provider);
    }
    return [...usable, ...last];
  }

  /** A probe taken by order() that no outcome will release: the payment went elsewhere. */
  release(provider: string): void {
    const circuit = this.circuits.get(provider);
    if (!circuit) return;
    this.advance(provider, circuit, this.now());
    if (circuit.state === 'half_open') circuit.probes.shift();
  }

  /** Every known provider's state (for logs and tests). */
  snapshot(): Record<string, CircuitState> {
    return Object.fromEntries([...this.circuits.keys()].map((provider) => [provider, this.state(provider)]));
  }

  private refresh(): void {
    const now = this.now();
    for (const [provider, circuit] of this.circuits) this.advance(provider, circuit, now);
  }

  private circuit(provider: string): Circuit {
    let circuit = this.circuits.get(provider);
    if (!circuit) {
      circuit = { state: 'closed', outcomes: [], openedAt: 0, probes: [] };
      this.circuits.set(provider, circuit);
      this.options.metrics?.providerCircuitState.set({ provider }, circuitStateValue.closed);
    }
    return circuit;
  }

  /** Time-driven changes: the end of the cool-down, probes that never reported, the window's old outcomes. */
  private advance(provider: string, circuit: Circuit, now: number): void {
    if (circuit.state === 'open' && now - circuit.openedAt >= this.settings.openMs) {
      this.transition(provider, circuit, 'half_open', now, `open for ${this.settings.openMs / 1000} s`);
    }
    if (circuit.state === 'half_open') circuit.probes = circuit.probes.filter((at) => now - at < this.settings.probeTimeoutMs);
    if (circuit.state === 'closed') this.prune(circuit, now);
  }

  private prune(circuit: Circuit, now: number): void {
    while (circuit.outcomes.length && now - circuit.outcomes[0]!.at >= this.settings.windowMs) circuit.outcomes.shift();
  }

  private transition(provider: string, circuit: Circuit, to: CircuitState, now: number, why: string): void {
    const from = circuit.state;
    circuit.state = to;
    circuit.outcomes = [];
    circuit.probes = [];
    if (to === 'open') circuit.openedAt = now;
    this.options.metrics?.providerCircuitState.set({ provider }, circuitStateValue[to]);
    this.options.metrics?.providerCircuitTransitions.inc({ provider, from, to });
    const line = { provider, from, to, reason: why };
    const message = `provider circuit ${to === 'half_open' ? 'half-open' : to}: ${provider}`;
    if (to === 'open') this.options.logger?.warn(line, message);
    else this.options.logger?.info(line, message);
  }
}

