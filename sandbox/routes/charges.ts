import { Hono } from 'hono';
import { z } from 'zod';
import { invalidRequest, notFound, SandboxError } from '../errors';
import { parseJsonBody, parseParams, requireIdempotencyKey, sendStored } from '../http';
import { requestFingerprint, runIdempotently, type EffectResult, type Tx } from '../idempotency';
import { chargeChanged, chargeEvent } from '../effects';
import { chargeJson, listJson, newChargeId, type ChargeRow, type ChargeStatus } from '../objects';
import { paymentMethodBehaviour, type PaymentMethodBehaviour } from '../payment-methods';
import type { SandboxDeps } from '../deps';

/** Far below 2^53, so amounts stay exact as JS numbers (and as int8). */
export const maxAmountMinor = 100_000_000_000_000;
export const amountMinor = z.number().int().positive().max(maxAmountMinor);

const createChargeBody = z.strictObject({
  amount_minor: amountMinor,
  currency: z
    .string()
    .regex(/^[A-Za-z]{3}$/, 'must be a three-letter ISO 4217 code')
    .transform((code) => code.toUpperCase()),
  payment_method: z.string().min(1).max(255),
  capture: z.boolean(),
  reference: z.string().min(1).max(255),
  description: z.string().max(1000).nullish(),
  /** Where the challenge page sends the customer back (methods that need authentication). */
  return_url: z.url({ protocol: /^https?$/ }).max(2000).nullish(),
});
type CreateChargeParams = z.output<typeof createChargeBody>;

const captureChargeBody = z.strictObject({
  amount_minor: amountMinor.optional(),
});

const voidChargeBody = z.strictObject({});

const listChargesQuery = z
  .strictObject({
    idempotency_key: z.string().min(1).optional(),
    reference: z.string().min(1).optional(),
  })
  .refine((q) => (q.idempotency_key === undefined) !== (q.reference === undefined), {
    message: 'give exactly one of idempotency_key or reference',
  });

/** Locked for the rest of the transaction, so concurrent captures, voids and refunds serialize. */
async function lockCharge(tx: Tx, id: string): Promise<ChargeRow> {
  const [row] = await tx<ChargeRow[]>`SELECT * FROM sandbox.charges WHERE id = ${id} FOR UPDATE`;
  if (!row) throw notFound('charge', id);
  return row;
}

const invalidState = (row: ChargeRow, action: string, allowed: ChargeStatus | ChargeStatus[]) => {
  const list = [allowed].flat();
  return invalidRequest(
    'invalid_state',
    `Charge ${row.id} has status '${row.status}'; only a ${list.map((s) => `'${s}'`).join(' or ')} charge can be ${action}.`,
  );
};

async function insertCharge(
  tx: Tx,
  deps: SandboxDeps,
  key: string,
  params: CreateChargeParams,
  behaviour: PaymentMethodBehaviour,
): Promise<EffectResult> {
  const decline = behaviour.kind === 'decline' ? behaviour : null;
  const status: ChargeStatus = decline
    ? 'declined'
    : behaviour.kind === 'challenge'
      ? 'requires_action'
      : behaviour.kind === 'async'
        ? 'processing'
        : params.capture
          ? 'succeeded'
          : 'requires_capture';
  const id = newChargeId();
  const challengeUrl = status === 'requires_action' ? `${deps.runtime.publicUrl}/challenge/${id}` : null;
  const [row] = await tx<ChargeRow[]>`
    INSERT INTO sandbox.charges (
      id, status, amount_minor, amount_captured_minor, currency, payment_method, reference,
      description, idempotency_key, failure_code, failure_message,
      capture, return_url, challenge_url, challenge_state, settle_at
    ) VALUES (
      ${id}, ${status}, ${params.amount_minor},
      ${status === 'succeeded' ? params.amount_minor : 0}, ${params.currency}, ${params.payment_method},
      ${params.reference}, ${params.description ?? null}, ${key},
      ${decline?.code ?? null}, ${decline?.message ?? null},
      ${params.capture}, ${params.return_url ?? null}, ${challengeUrl}, ${challengeUrl ? 'pending' : null},
      ${status === 'processing' ? deps.sql`clock_timestamp() + ${deps.config.asyncSettleMs}::int * interval '1 millisecond'` : null}
    )
    RETURNING *`;
  await chargeChanged(tx, deps, row!);
  const charge = chargeJson(row!);
  if (decline) {
    return { status: 402, body: { error: { type: 'card_error', code: decline.code, message: decline.message, charge } } };
  }
  return { status: 200, body: charge, lost: behaviour.kind === 'lose_response' };
}

/** Counts this attempt durably; the key fails while it has made at most `failures` attempts. */
async function flakyAttemptFails(deps: SandboxDeps, key: string): Promise<boolean> {
  const [row] = await deps.sql<{ attempts: number }[]>`
    INSERT INTO sandbox.flaky_attempts (idempotency_key, attempts) VALUES (${key}, 1)
    ON CONFLICT (idempotency_key) DO UPDATE SET attempts = sandbox.flaky_attempts.attempts + 1
    RETURNING attempts`;
  return row!.attempts <= deps.config.flakyFailures;
}

export function chargeRoutes(deps: SandboxDeps) {
  const { sql, config } = deps;

  return new Hono()
    .post('/', async (c) => {
      const key = requireIdempotencyKey(c);
      const params = await parseJsonBody(c, createChargeBody);
      const known = paymentMethodBehaviour(params.payment_method);
      // Outage `declining`: the processor fails every new charge, whatever the card.
      const behaviour: typeof known =
        known && deps.runtime.outage === 'declining'
          ? { kind: 'decline', code: 'processing_error', message: 'An error occurred while processing the card (sandbox outage "declining").' }
          : known;
      if (!behaviour) {
        throw invalidRequest('invalid_payment_method', `No such payment method: '${params.payment_method}'.`);
      }
      const scope = { endpoint: 'POST /v1/charges', key, fingerprint: requestFingerprint(params), ttlSeconds: config.idempotencyKeyTtlSeconds };

      const stored = await runIdempotently(
        sql,
        scope,
        (tx) => insertCharge(tx, deps, key, params, behaviour),
        async () => {
          if (behaviour.kind === 'flaky' && (await flakyAttemptFails(deps, key))) {
            throw new SandboxError(503, 'api_error', 'service_unavailable', 'The sandbox is briefly unavailable (pm_card_flaky); retry with the same key.');
          }
          if (behaviour.kind === 'slow') await new Promise((resolve) => setTimeout(resolve, config.slowMs));
        },
      );
      return sendStored(c, stored);
    })

    .post('/:id/capture', async (c) => {
      const key = requireIdempotencyKey(c);
      const params = await parseJsonBody(c, captureChargeBody);
      const id = c.req.param('id');
      const scope = {
        endpoint: 'POST /v1/charges/:id/capture',
        key,
        fingerprint: requestFingerprint({ charge: id, ...params }),
        ttlSeconds: config.idempotencyKeyTtlSeconds,
      };
      const stored = await runIdempotently(sql, scope, async (tx) => {
        const charge = await lockCharge(tx, id);
        if (charge.status !== 'requires_capture') throw invalidState(charge, 'captured', 'requires_capture');
        const amount = params.amount_minor ?? charge.amount_minor;
        if (amount > charge.amount_minor) {
          throw invalidRequest('amount_too_large', `Cannot capture ${amount}: only ${charge.amount_minor} is authorized.`);
        }
        // A partial capture releases the rest of the authorization: it can never be captured later.
        const [row] = await tx<ChargeRow[]>`
          UPDATE sandbox.charges SET status = 'succeeded', amount_captured_minor = ${amount}, updated_at = clock_timestamp()
          WHERE id = ${id}
          RETURNING *`;
        await chargeChanged(tx, deps, row!);
        return { status: 200, body: chargeJson(row!) };
      });
      return sendStored(c, stored);
    })

    .post('/:id/void', async (c) => {
      const key = requireIdempotencyKey(c);
      const params = await parseJsonBody(c, voidChargeBody);
      const id = c.req.param('id');
      const scope = {
        endpoint: 'POST /v1/charges/:id/void',
        key,
        fingerprint: requestFingerprint({ charge: id, ...params }),
        ttlSeconds: config.idempotencyKeyTtlSeconds,
      };
      const stored = await runIdempotently(sql, scope, async (tx) => {
        const charge = await lockCharge(tx, id);
        // A charge waiting for its customer's challenge can be voided too: the challenge then
        // shows "expired" and completing it changes nothing.
        if (charge.status !== 'requires_capture' && charge.status !== 'requires_action') {
          throw invalidState(charge, 'voided', ['requires_capture', 'requires_action']);
        }
        const [row] = await tx<ChargeRow[]>`
          UPDATE sandbox.charges
          SET status = 'canceled', updated_at = clock_timestamp(),
              challenge_state = CASE WHEN challenge_state = 'pending' THEN 'expired' ELSE challenge_state END
          WHERE id = ${id} RETURNING *`;
        await chargeEvent(tx, deps, row!);
        return { status: 200, body: chargeJson(row!) };
      });
      return sendStored(c, stored);
    })

    .get('/', async (c) => {
      const query = parseParams(listChargesQuery, c.req.query());
      // Every charge ever committed, declined ones included: this is how charges are counted.
      const rows = query.idempotency_key !== undefined
        ? await sql<ChargeRow[]>`
            SELECT * FROM sandbox.charges WHERE idempotency_key = ${query.idempotency_key} ORDER BY created_at, id`
        : await sql<ChargeRow[]>`
            SELECT * FROM sandbox.charges WHERE reference = ${query.reference!} ORDER BY created_at, id`;
      return c.json(listJson(rows.map(chargeJson)));
    })

    .get('/:id', async (c) => {
      const id = c.req.param('id');
      const [row] = await sql<ChargeRow[]>`SELECT * FROM sandbox.charges WHERE id = ${id}`;
      if (!row) throw notFound('charge', id);
      return c.json(chargeJson(row));
    });
}
