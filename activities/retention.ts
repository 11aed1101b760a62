import type { Sql } from '../db/connect';
import { deleteExpiredRecords } from '../db/idempotency-records';
import type { Logger } from '../lib/logger';

/**
 * Deletes idempotency records whose retention window has passed, for finished operations
 * only (db/idempotency-records.ts). Once a key is gone, the domain constraints still refuse a second
 * payment for the order and a second ledger posting for the event. Run by retentionWorkflow
 * on its Temporal Schedule (worker/schedules.ts), never by a timer in the process.
 */
export class RetentionJob {
  constructor(
    private readonly sql: Sql,
    private readonly logger: Logger,
  ) {}

  async runOnce(): Promise<number> {
    let total = 0;
    for (let deleted = -1; deleted !== 0; total += deleted) deleted = await deleteExpiredRecords(this.sql);
    if (total) this.logger.info({ deleted: total }, 'expired idempotency records deleted');
    return total;
  }
}
