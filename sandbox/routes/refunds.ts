import { Hono } from 'hono';
import { z } from 'zod';
import { invalidRequest, notFound } from '../errors';
import { parseJsonBody, parseParams, requireIdempotencyKey, sendStored } from '../http';
import { requestFingerprint, runIdempotently } from '../idempotency';
import { chargeEvent, recordRefundTransaction, refundEvent } from '../effects';
import { listJson, newRefundId, refundJson, type ChargeRow, type RefundRow } from '../objects';
import { paymentMethodBehaviour } from '../payment-methods';
import { amountMinor } from './charges';
import { openChargebackOf } from './disputes';
import type { SandboxDeps } from '../deps';

const createRefundBody = z.strictObject({
  charge: z.string().min(1).max(255),
  amount_minor: amountMinor,
  reference: z.string().min(1).max(255),
});

const listRefundsQuery = z
  .strictObject({
    idempotency_key: z.string().min(1).optional(),
    charge: z.string().min(1).optional(),
  })
  .refine((q) => (q.idempotency_key === undefined) !== (q.charge === undefined), {
    message: 'give exactly one of idempotency_key or charge',
  });

export function refundRoutes(deps: SandboxDeps) {
  const { sql, config } = deps;
  return new Hono()
    .post('/', async (c) => {
      const key = requireIdempotencyKey(c);
      const params = await parseJsonBody(c, createRefundBody);
      const scope = { endpoint: 'POST /v1/refunds', key, fingerprint: requestFingerprint(params), ttlSeconds: config.idempotencyKeyTtlSeconds };

      const stored = await runIdempotently(sql, scope, async (tx) => {
        // Locking the charge serializes concurrent refunds of it, so the remaining amount
        // read here is still true when the refund commits.
        const [charge] = await tx<ChargeRow[]>`
          SELECT * FROM sandbox.charges WHERE id = ${params.charge} FOR UPDATE`;
        if (!charge) throw notFound('charge', params.charge);
        if (charge.status !== 'succeeded') {
          throw invalidRequest(
            'invalid_state',
            `Charge ${charge.id} has status '${charge.status}'; only a captured ('succeeded') charge can be refunded.`,
          );
        }
        const chargeback = await openChargebackOf(tx, charge);
        if (chargeback) {
          throw invalidRequest('charge_disputed', `Charge ${charge.id} has an open chargeback (${chargeback.id}); its money is held by the card network.`);
        }
        const refundable = charge.amount_captured_minor - charge.amount_refunded_minor;
        if (params.amount_minor > refundable) {
          throw invalidRequest(
            'amount_too_large',
            `Refund amount ${params.amount_minor} is greater than the ${refundable} left to refund on charge ${charge.id}.`,
          );
        }

        const fails = paymentMethodBehaviour(charge.payment_method)?.kind === 'refunds_fail';
        const [refund] = await tx<RefundRow[]>`
          INSERT INTO sandbox.refunds (
            id, charge_id, amount_minor, status, reference, idempotency_key, failure_code, failure_message
          ) VALUES (
            ${newRefundId()}, ${charge.id}, ${params.amount_minor}, ${fails ? 'failed' : 'succeeded'},
            ${params.reference}, ${key},
            ${fails ? 'expired_or_canceled_card' : null},
            ${fails ? 'The card was canceled or expired; the refund could not be sent.' : null}
          )
          RETURNING *`;
        // A failed refund moves no money, so only a successful one counts against the capture.
        await refundEvent(tx, deps, refund!);
        if (!fails) {
          const [updated] = await tx<ChargeRow[]>`
            UPDATE sandbox.charges
            SET amount_refunded_minor = amount_refunded_minor + ${params.amount_minor}, updated_at = clock_timestamp()
            WHERE id = ${charge.id}
            RETURNING *`;
          await recordRefundTransaction(tx, deps, refund!, updated!);
          await chargeEvent(tx, deps, updated!, 'charge.refunded');
        }
        return { status: 200, body: refundJson(refund!) };
      });
      return sendStored(c, stored);
    })

    .get('/', async (c) => {
      const query = parseParams(listRefundsQuery, c.req.query());
      const rows = query.idempotency_key !== undefined
        ? await sql<RefundRow[]>`
            SELECT * FROM sandbox.refunds WHERE idempotency_key = ${query.idempotency_key} ORDER BY created_at, id`
        : await sql<RefundRow[]>`
            SELECT * FROM sandbox.refunds WHERE charge_id = ${query.charge!} ORDER BY created_at, id`;
      return c.json(listJson(rows.map(refundJson)));
    })

    .get('/:id', async (c) => {
      const id = c.req.param('id');
      const [row] = await sql<RefundRow[]>`SELECT * FROM sandbox.refunds WHERE id = ${id}`;
      if (!row) throw notFound('refund', id);
      return c.json(refundJson(row));
    });
}
