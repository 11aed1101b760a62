import type { Sql } from '../db/connect';
import type { Logger } from '../lib/logger';
import type { WorkerMetrics } from '../lib/metrics';
import type { PaymentProvider } from '../provider/types';
import type { EventType } from '../db/outbox';

/** The outbox event types a payment can have (its event keys are businessEventKey.paymentEvent(id, type)). */
const paymentEventTypes: EventType[] = ['payment.succeeded', 'payment.requires_capture', 'payment.declined', 'payment.failed', 'payment.canceled'];

/**
 * Counts, for each payment that recently reached a recorded state, its effects where they
 * happened: charges at the provider (by our reference), ledger transactions and events in
 * PostgreSQL. Every count should be exactly one; anything else is logged as an error and
 * counted in duplicate_effects_total. Off the hot path: it runs on a timer after the fact.
 */
export class Reconciler {
  private timer: NodeJS.Timeout | null = null;
  private since = new Date(Date.now() - 60_000);

  constructor(
    private readonly deps: { sql: Sql; provider: PaymentProvider; metrics: WorkerMetrics; logger: Logger },
    private readonly intervalMs: number,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.runOnce().catch((err) => this.deps.logger.warn({ err }, 'reconciliation pass failed')), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** Reconciles payments updated since the last pass (at most `limit`); returns how many. */
  async runOnce(limit = 200): Promise<number> {
    const { sql, provider, metrics, logger } = this.deps;
    const payments = await sql<{ id: string; status: string; updated_at: Date; ledger: number; max_events: number }[]>`
      SELECT p.id, p.status, p.updated_at,
             (SELECT count(*)::int FROM ledger_transactions t WHERE t.payment_id = p.id AND t.refund_id IS NULL) AS ledger,
             -- Why: exact keys use the (tenant_id, event_key) index; LIKE 'payment:<id>:%' scanned
             -- all of the tenant's events per payment, a cost growing with history (npm run bench).
             (SELECT coalesce(max(n), 0)::int FROM (
                SELECT count(*) AS n FROM outbox_events e
                WHERE e.tenant_id = p.tenant_id
                  AND e.event_key = ANY (ARRAY(SELECT 'payment:' || p.id || ':' || t FROM unnest(${paymentEventTypes}::text[]) AS t))
                GROUP BY e.type) per_type) AS max_events
      FROM payments p
      WHERE p.updated_at > ${this.since} AND p.status <> 'processing'
      ORDER BY p.updated_at
      LIMIT ${limit}`;
    for (const payment of payments) {
      const charges = (await provider.listChargesByReference(payment.id)).length;
      const captured = payment.status === 'succeeded' || payment.status === 'refunded';
      const counts = { provider_charge: charges, ledger_transaction: payment.ledger, event: payment.max_events };
      for (const [effect, count] of Object.entries(counts)) {
        if (effect === 'ledger_transaction' && !captured) continue; // only captured money is booked
        metrics.effectsPerPayment.observe({ effect }, count);
        if (count > 1) {
          metrics.duplicateEffects.inc({ effect });
          logger.error({ payment_id: payment.id, effect, count }, 'duplicate effect found by reconciliation');
        }
      }
      this.since = payment.updated_at;
    }
    return payments.length;
  }
}
