import { Hono } from 'hono';
import { z } from 'zod';
import { invalidRequest, notFound } from '../errors';
import { parseJsonBody, parseParams } from '../http';
import { chargeChanged, chargeEvent, chargeFeeMinor, recordRefundTransaction, refundEvent } from '../effects';
import { openDispute } from '../disputes';
import { approvalRatesBody, readApprovalRates, replaceApprovalRates } from '../approval-rates';
import { chargeJson, disputeJson, newChargeId, newRefundId, refundJson, type ChargeRow, type RefundRow } from '../objects';
import { amountMinor } from './charges';
import { faultsJson, webhookFaultsBody, webhookFaultsOf, type WebhookDelivery } from '../webhooks';
import type { OutageMode, SandboxDeps } from '../deps';

/**
 * The sandbox's own controls, for tests and demos (never part of a real PSP's API): outages,
 * how its issuers answer (approval rates), webhook faults and redelivery, the events it made,
 * discrepancies made on purpose, and a dispute opened on demand.
 */

const outageBody = z.strictObject({ mode: z.enum(['none', 'unavailable', 'down', 'timeout', 'declining']) });

const eventsQuery = z.strictObject({ charge: z.string().min(1).max(255) });

const currency = z
  .string()
  .regex(/^[A-Za-z]{3}$/, 'must be a three-letter ISO 4217 code')
  .transform((code) => code.toUpperCase());

const discrepancyBody = z.discriminatedUnion('kind', [
  /** A charge made at the sandbox directly (not through the API) with a payment's reference. */
  z.strictObject({ kind: z.literal('direct_charge'), reference: z.string().min(1).max(255), amount_minor: amountMinor, currency }),
  /** A refund made "in the PSP's dashboard": no reference of ours. */
  z.strictObject({ kind: z.literal('dashboard_refund'), charge_id: z.string().min(1).max(255), amount_minor: amountMinor }),
  /** The PSP's records of a captured charge now say another amount (its report line too). */
  z.strictObject({ kind: z.literal('alter_amount'), charge_id: z.string().min(1).max(255), amount_minor: amountMinor }),
]);

/** The card network disputes a captured charge now, whatever its payment method. */
const disputeBody = z.strictObject({ charge_id: z.string().min(1).max(255), stage: z.enum(['chargeback', 'inquiry']).default('chargeback') });

export function adminRoutes(deps: SandboxDeps, delivery: WebhookDelivery) {
  const { sql, runtime } = deps;

  return new Hono()
    .get('/outage', (c) => c.json({ mode: runtime.outage }))
    .post('/outage', async (c) => {
      const { mode } = await parseJsonBody(c, outageBody);
      runtime.outage = mode as OutageMode;
      return c.json({ mode: runtime.outage });
    })

    // This sandbox's approval rates (approval-rates.ts), kept under its own URL in the schema.
    .get('/approval_rates', async (c) => c.json({ rates: await readApprovalRates(sql, runtime.publicUrl) }))
    .post('/approval_rates', async (c) => {
      const { rates } = await parseJsonBody(c, approvalRatesBody);
      await replaceApprovalRates(sql, runtime.publicUrl, rates);
      return c.json({ rates: await readApprovalRates(sql, runtime.publicUrl) });
    })

    .get('/webhook_faults', (c) => c.json(faultsJson(runtime.faults)))
    .post('/webhook_faults', async (c) => {
      runtime.faults = webhookFaultsOf(await parseJsonBody(c, webhookFaultsBody));
      return c.json(faultsJson(runtime.faults));
    })

    .get('/events', async (c) => {
      const q = parseParams(eventsQuery, c.req.query());
      const rows = await sql<
        { id: string; type: string; state: string; attempts: number; created_at: Date; delivered_at: Date | null; last_status: number | null; body: string }[]
      >`
        SELECT id, type, state, attempts, created_at, delivered_at, last_status, body
        FROM sandbox.events WHERE charge_id = ${q.charge} ORDER BY seq`;
      return c.json({
        object: 'list',
        data: rows.map((e) => ({
          id: e.id,
          type: e.type,
          state: e.state,
          attempts: e.attempts,
          created_at: e.created_at.toISOString(),
          delivered_at: e.delivered_at?.toISOString() ?? null,
          last_status: e.last_status,
          object: (JSON.parse(e.body) as { data: { object: unknown } }).data.object,
        })),
      });
    })
    .post('/events/:id/redeliver', async (c) => {
      const id = c.req.param('id');
      const result = await delivery.redeliver(id);
      if (!result.found) throw notFound('event', id);
      if (result.status === null && result.error !== null && !result.ok && !runtime.webhook) {
        throw invalidRequest('no_webhook_url', result.error);
      }
      return c.json({ id, delivered: result.ok, status: result.status, error: result.error });
    })

    .post('/disputes', async (c) => {
      const params = await parseJsonBody(c, disputeBody);
      const opened = await sql.begin(async (tx) => {
        const [charge] = await tx<ChargeRow[]>`SELECT * FROM sandbox.charges WHERE id = ${params.charge_id} FOR UPDATE`;
        if (!charge) throw notFound('charge', params.charge_id);
        if (charge.status !== 'succeeded' || charge.amount_captured_minor <= 0) {
          throw invalidRequest('invalid_state', `Charge ${charge.id} has status '${charge.status}'; only a captured ('succeeded') charge can be disputed.`);
        }
        await tx`UPDATE sandbox.charges SET dispute_at = NULL WHERE id = ${charge.id}`;
        const dispute = await openDispute(tx, deps, charge, params.stage);
        if (!dispute) throw invalidRequest('charge_already_disputed', `Charge ${charge.id} has a dispute already.`);
        return disputeJson(dispute, charge);
      });
      return c.json(opened);
    })

    .post('/discrepancies', async (c) => {
      const params = await parseJsonBody(c, discrepancyBody);
      const result = await sql.begin(async (tx) => {
        if (params.kind === 'direct_charge') {
          const id = newChargeId();
          const [row] = await tx<ChargeRow[]>`
            INSERT INTO sandbox.charges (
              id, status, amount_minor, amount_captured_minor, currency, payment_method, reference,
              description, idempotency_key, capture
            ) VALUES (
              ${id}, 'succeeded', ${params.amount_minor}, ${params.amount_minor}, ${params.currency}, 'pm_card_visa',
              ${params.reference}, 'made directly at the sandbox (discrepancy)', ${`direct_${id}`}, true
            )
            RETURNING *`;
          await chargeChanged(tx, deps, row!);
          return { kind: params.kind, charge: chargeJson(row!) };
        }
        const [charge] = await tx<ChargeRow[]>`SELECT * FROM sandbox.charges WHERE id = ${params.charge_id} FOR UPDATE`;
        if (!charge) throw notFound('charge', params.charge_id);
        if (charge.status !== 'succeeded') {
          throw invalidRequest('invalid_state', `Charge ${charge.id} has status '${charge.status}'; only a captured ('succeeded') charge can be changed.`);
        }
        if (params.kind === 'dashboard_refund') {
          const refundable = charge.amount_captured_minor - charge.amount_refunded_minor;
          if (params.amount_minor > refundable) {
            throw invalidRequest('amount_too_large', `Refund amount ${params.amount_minor} is greater than the ${refundable} left to refund on charge ${charge.id}.`);
          }
          const refundId = newRefundId();
          const [refund] = await tx<RefundRow[]>`
            INSERT INTO sandbox.refunds (id, charge_id, amount_minor, status, reference, idempotency_key)
            VALUES (${refundId}, ${charge.id}, ${params.amount_minor}, 'succeeded', '', ${`dashboard_${refundId}`})
            RETURNING *`;
          const [updated] = await tx<ChargeRow[]>`
            UPDATE sandbox.charges
            SET amount_refunded_minor = amount_refunded_minor + ${params.amount_minor}, updated_at = clock_timestamp()
            WHERE id = ${charge.id} RETURNING *`;
          await refundEvent(tx, deps, refund!);
          await recordRefundTransaction(tx, deps, refund!, updated!);
          await chargeEvent(tx, deps, updated!, 'charge.refunded');
          return { kind: params.kind, refund: refundJson(refund!), charge: chargeJson(updated!) };
        }
        // alter_amount: silently, as a PSP-side error would be: no event.
        if (params.amount_minor < charge.amount_refunded_minor) {
          throw invalidRequest('amount_too_small', `Charge ${charge.id} has ${charge.amount_refunded_minor} refunded; its amount cannot go below that.`);
        }
        const [updated] = await tx<ChargeRow[]>`
          UPDATE sandbox.charges
          SET amount_minor = GREATEST(amount_minor, ${params.amount_minor}), amount_captured_minor = ${params.amount_minor},
              updated_at = clock_timestamp()
          WHERE id = ${charge.id} RETURNING *`;
        await tx`
          UPDATE sandbox.balance_transactions
          SET amount_minor = ${params.amount_minor}, fee_minor = ${chargeFeeMinor(params.amount_minor)}
          WHERE charge_id = ${charge.id} AND type = 'charge'`;
        return { kind: params.kind, charge: chargeJson(updated!) };
      });
      return c.json(result);
    });
}
