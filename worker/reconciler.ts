import type { Sql } from '../db/connect';
import { paymentEffectCounts } from '../db/payments';
import type { Logger } from '../lib/logger';
import type { WorkerMetrics } from '../lib/metrics';
import type { PaymentProvider } from '../provider/types';
import { paymentEventTypes } from '../shared/definitions';

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
    const payments = await paymentEffectCounts(sql, this.since, limit, paymentEventTypes);
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
