import { Hono } from 'hono';
import { z } from 'zod';
import { invalidRequest } from '../errors';
import { parseParams } from '../http';
import type { SandboxDeps } from '../deps';

/**
 * GET /v1/reports/balance_transactions?from=&to=&starting_after=&limit= — the money the
 * sandbox moved in [from, to): captured charges (positive) and successful refunds (negative),
 * with fees, oldest first; `starting_after` is the last id of the previous page.
 */

const query = z.strictObject({
  from: z.iso.datetime({ offset: true }),
  to: z.iso.datetime({ offset: true }),
  starting_after: z.string().min(1).max(255).optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
});

interface TransactionRow {
  seq: string;
  id: string;
  type: 'charge' | 'refund' | 'dispute' | 'dispute_reversal' | 'excessive_retry';
  source: string;
  charge_id: string;
  reference: string | null;
  amount_minor: number;
  fee_minor: number;
  currency: string;
  created_at: Date;
  available: boolean;
}

export function reportRoutes({ sql }: SandboxDeps) {
  return new Hono().get('/balance_transactions', async (c) => {
    const q = parseParams(query, c.req.query());
    const from = new Date(q.from);
    const to = new Date(q.to);
    if (!(from < to)) throw invalidRequest('parameter_invalid', 'from must be before to');
    let afterSeq = '0';
    if (q.starting_after !== undefined) {
      const [cursor] = await sql<{ seq: string }[]>`SELECT seq FROM sandbox.balance_transactions WHERE id = ${q.starting_after}`;
      if (!cursor) throw invalidRequest('resource_missing', `No such balance transaction: '${q.starting_after}'`);
      afterSeq = cursor.seq;
    }
    const rows = await sql<TransactionRow[]>`
      SELECT seq, id, type, source, charge_id, reference, amount_minor, fee_minor, currency, created_at,
             available_at <= clock_timestamp() AS available
      FROM sandbox.balance_transactions
      WHERE created_at >= ${from} AND created_at < ${to} AND seq > ${afterSeq}
      ORDER BY seq
      LIMIT ${q.limit + 1}`;
    const page = rows.slice(0, q.limit);
    return c.json({
      object: 'list',
      data: page.map((t) => ({
        id: t.id,
        object: 'balance_transaction',
        type: t.type,
        source: t.source,
        charge: t.charge_id,
        reference: t.reference,
        amount_minor: t.amount_minor,
        fee_minor: t.fee_minor,
        currency: t.currency,
        status: t.available ? 'available' : 'pending',
        created_at: t.created_at.toISOString(),
      })),
      has_more: rows.length > q.limit,
    });
  });
}
