import type { Sql } from '../db/connect';
import { deleteExpiredRecords } from '../db/idempotency-records';
import type { Logger } from '../lib/logger';

/**
 * Deletes idempotency records whose retention window has passed, for finished operations
 * only (db/idempotency-records.ts). Once a key is gone, the domain constraints still refuse a second
 * payment for the order and a second ledger posting for the event.
 */
export class RetentionJob {
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly sql: Sql,
    private readonly logger: Logger,
    private readonly intervalMs: number,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.runOnce().catch((err) => this.logger.warn({ err }, 'retention pass failed')), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  async runOnce(): Promise<number> {
    let total = 0;
    for (let deleted = -1; deleted !== 0; total += deleted) deleted = await deleteExpiredRecords(this.sql);
    if (total) this.logger.info({ deleted: total }, 'expired idempotency records deleted');
    return total;
  }
}
