import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * Prometheus metrics. Each process builds its own registry (the API's or the worker's), so
 * tests that run both in one process never register a metric twice.
 */

/** How a mutating request was answered by the idempotency layer. */
export type IdempotencyOutcome =
  /** first delivery: claimed the key and executed */
  | 'new'
  /** a finished operation: the stored response, from PostgreSQL alone */
  | 'replayed'
  /** same key, different request: 422 */
  | 'mismatch'
  /** a duplicate that attached to the running operation and got its final response */
  | 'waited'
  /** the outcome was not known within the bounded wait: 202 */
  | 'pending'
  /** a dependency was unreachable: 503, nothing executed */
  | 'fail_closed';

export function createApiMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'api_' });
  return {
    registry,
    httpDuration: new Histogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP request latency by route template and status.',
      labelNames: ['method', 'route', 'status'] as const,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    idempotency: new Counter({
      name: 'idempotency_requests_total',
      help: 'Mutating requests by operation and idempotency outcome (new, replayed, mismatch, waited, pending, fail_closed).',
      labelNames: ['operation', 'outcome'] as const,
      registers: [registry],
    }),
  };
}
export type ApiMetrics = ReturnType<typeof createApiMetrics>;

export function createWorkerMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'worker_' });
  return {
    registry,
    providerCircuitState: new Gauge({
      name: 'provider_circuit_state',
      help: "Each PSP's shared health (every worker's, read from PostgreSQL at the scrape): 0 closed, 1 half-open (one probe payment tries it first), 2 open (tried last).",
      labelNames: ['provider'] as const,
      registers: [registry],
    }),
    paymentOutcomes: new Counter({
      name: 'payment_outcomes_total',
      help: 'Payments reaching a status, as recorded by the workflow.',
      labelNames: ['status'] as const,
      registers: [registry],
    }),
    refundOutcomes: new Counter({
      name: 'refund_outcomes_total',
      help: 'Refunds reaching a status, as recorded by the workflow.',
      labelNames: ['status'] as const,
      registers: [registry],
    }),
    effectsPerPayment: new Histogram({
      name: 'effects_per_payment',
      help: 'Effects per payment found by reconciliation: provider charges, ledger transactions, events. Should be exactly 1 each.',
      labelNames: ['effect'] as const,
      buckets: [0, 1, 2, 3, 5],
      registers: [registry],
    }),
    duplicateEffects: new Counter({
      name: 'duplicate_effects_total',
      help: 'Payments found with more than one effect of a kind (should stay 0).',
      labelNames: ['effect'] as const,
      registers: [registry],
    }),
    reconciliationDiscrepancies: new Counter({
      name: 'reconciliation_discrepancies_total',
      help: 'New discrepancies found by reconciliation with the PSP, by provider and kind (each is also an error log line: alert on any increase).',
      labelNames: ['provider', 'kind'] as const,
      registers: [registry],
    }),
    reconciliationRuns: new Counter({
      name: 'reconciliation_runs_total',
      help: 'Reconciliation runs finished, by provider and status (clean, discrepancies, failed).',
      labelNames: ['provider', 'status'] as const,
      registers: [registry],
    }),
    webhookAttempts: new Counter({
      name: 'webhook_delivery_attempts_total',
      help: 'Webhook delivery attempts by result (delivered, failed, gave_up).',
      labelNames: ['result'] as const,
      registers: [registry],
    }),
    webhookDuration: new Histogram({
      name: 'webhook_delivery_duration_seconds',
      help: 'Duration of one webhook delivery attempt.',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    outboxLag: new Gauge({
      name: 'outbox_lag_seconds',
      help: 'Age of the oldest event still waiting for delivery (0 when none).',
      registers: [registry],
    }),
    outboxPending: new Gauge({
      name: 'outbox_pending_events',
      help: 'Events waiting for delivery.',
      registers: [registry],
    }),
  };
}
export type WorkerMetrics = ReturnType<typeof createWorkerMetrics>;

/** A Prometheus label value, escaped. */
function labelValue(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

/** What routing's metrics are rendered from: the pooled counts per segment level, and each PSP's shared health. */
export interface RoutingMetricsInput {
  segments: readonly { segment: string; providers: readonly { provider: string; approvalEstimate: number; share: number; approvals: number; declines: number; errors: number }[] }[];
  health: readonly { provider: string; state: 'closed' | 'open' | 'half_open' }[];
}

/**
 * Routing's shared state in the Prometheus text format, per PSP and segment level (pooled
 * counts only: no tenant, no BIN in the labels), read from PostgreSQL at each scrape, so every
 * API process shows the same figures (db/routing.ts routingSnapshot).
 */
export function routingMetricsText(input: RoutingMetricsInput): string {
  const lines: string[] = [];
  const family = (name: string, type: 'counter' | 'gauge', help: string, samples: string[]) => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, ...samples);
  };
  const each = (value: (p: RoutingMetricsInput['segments'][number]['providers'][number]) => number, extra = '') =>
    input.segments.flatMap(({ segment, providers }) => providers.map((p) => `{provider="${labelValue(p.provider)}",segment="${labelValue(segment)}"${extra}} ${value(p)}`));
  family('routing_outcomes_total', 'counter', "First attempts counted by routing per PSP and segment level: the issuer's approvals and declines, and the PSP's own errors.", [
    ...each((p) => p.approvals, ',outcome="approved"').map((s) => `routing_outcomes_total${s}`),
    ...each((p) => p.declines, ',outcome="declined"').map((s) => `routing_outcomes_total${s}`),
    ...each((p) => p.errors, ',outcome="error"').map((s) => `routing_outcomes_total${s}`),
  ]);
  family('routing_traffic_share', 'gauge', "A PSP's share of the segment level's recent (recency-weighted) outcomes.", each((p) => p.share).map((s) => `routing_traffic_share${s}`));
  family('routing_approval_estimate', 'gauge', "The posterior mean of a PSP's approval rate at the segment level now.", each((p) => p.approvalEstimate).map((s) => `routing_approval_estimate${s}`));
  family('routing_provider_health', 'gauge', "Each PSP's shared health, as every worker reads it: 0 in, 1 half-open (probed), 2 out of first place.", input.health.map((h) => `routing_provider_health{provider="${labelValue(h.provider)}"} ${circuitValue[h.state]}`));
  return `${lines.join('\n')}\n`;
}

const circuitValue = { closed: 0, half_open: 1, open: 2 } as const;
