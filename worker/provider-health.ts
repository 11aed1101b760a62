import type { Sql } from '../db/connect';
import { listHealth } from '../db/routing';
import type { WorkerMetrics } from '../lib/metrics';
import type { CircuitState } from '../domain/routing';

/**
 * The worker's view of each PSP's shared health (db/routing.ts routing_health, the one health
 * mechanism: every worker's charge attempts feed it, every route's decision reads it;
 * docs/routing-and-waits.md). Nothing is kept here: at each scrape of the worker's /metrics the
 * gauge `provider_circuit_state{provider}` is set from the shared rows, so every worker shows
 * the same state.
 */

/** The gauge's value per state (`provider_circuit_state`). */
export const circuitStateValue: Record<CircuitState, number> = { closed: 0, half_open: 1, open: 2 };

/**
 * Sets `provider_circuit_state` for each configured PSP from the shared health (a PSP without a
 * row is closed). The worker process calls it before each scrape.
 */
export async function showSharedHealth(sql: Sql, metrics: Pick<WorkerMetrics, 'providerCircuitState'>, providers: readonly string[]): Promise<void> {
  const rows = new Map((await listHealth(sql)).map((row) => [row.provider, row.state]));
  for (const provider of providers) metrics.providerCircuitState.set({ provider }, circuitStateValue[rows.get(provider) ?? 'closed']);
}
