import { Hono } from 'hono';
import { z } from 'zod';
import { invalidRequest, notFound, SandboxError } from '../errors';
import { parseJsonBody, parseParams, requireIdempotencyKey, sendStored } from '../http';
import { requestFingerprint, runIdempotently, type EffectResult, type Tx } from '../idempotency';
import { chargeChanged, chargeEvent } from '../effects';
import { chargeJson, listJson, newBalanceTransactionId, newChargeId, newSavedCardId, type ChargeRow, type ChargeStatus } from '../objects';
import { offSessionBehaviour, paymentMethodBehaviour, testCard, type PaymentMethodBehaviour } from '../payment-methods';
import { issueNetworkTransactionId, networkCardOf } from '../network';
import { EXCESSIVE_RETRY_FEE_MINOR, networkAttempt, type NetworkAnswer } from '../network-attempts';
import { issuerApproves, issuerDecline, readApprovalRates } from '../approval-rates';
import type { SandboxDeps } from '../deps';

/** Far below 2^53, so amounts stay exact as JS numbers (and as int8). */
export const maxAmountMinor = 100_000_000_000_000;
export const amountMinor = z.number().int().positive().max(maxAmountMinor);

const createChargeBody = z
  .strictObject({
    amount_minor: amountMinor,
    currency: z
      .string()
      .regex(/^[A-Za-z]{3}$/, 'must be a three-letter ISO 4217 code')
      .transform((code) => code.toUpperCase()),
    /** A test payment method (pm_card_visa), or a card this sandbox saved (card_…). */
    payment_method: z.string().min(1).max(255).optional(),
    /**
     * Instead of payment_method: a card saved elsewhere, charged by the card network's
     * transaction id of its first payment (network.ts), with the card's brand, last4 and expiry.
     */
    network_transaction_id: z.string().min(1).max(600).optional(),
    card: z.strictObject({ brand: z.string().min(1).max(40), last4: z.string().regex(/^[0-9]{4}$/), exp_month: z.number().int().min(1).max(12), exp_year: z.number().int().min(2000).max(9999) }).optional(),
    capture: z.boolean(),
    reference: z.string().min(1).max(255),
    description: z.string().max(1000).nullish(),
    /** Where the challenge page sends the customer back (methods that need authentication). */
    return_url: z.url({ protocol: /^https?$/ }).max(2000).nullish(),
    /** The customer is not there (a merchant-initiated charge of a saved card): no challenge can be answered. */
    off_session: z.boolean().optional(),
    /** Save the card for charges without the customer, as a token of this sandbox. */
    setup_future_usage: z.literal('off_session').optional(),
  })
  .refine((body) => (body.payment_method === undefined) !== (body.network_transaction_id === undefined), {
    message: 'give exactly one of payment_method or network_transaction_id',
  })
  .refine((body) => body.network_transaction_id === undefined || body.card !== undefined, {
    message: 'a charge by network_transaction_id names the card (brand, last4, exp_month, exp_year)',
    path: ['card'],
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

/** The card a charge is made with: a test card, or what a saved card or a network transaction id stands for. */
interface ChargedCard {
  /** The test payment method whose behaviour the charge follows. */
  testCard: string;
  /** The saved card token charged (card_…), if any. */
  savedCard: string | null;
  /** The network transaction id of the card's first payment, when this is a charge of a saved card. */
  networkTransactionId: string | null;
  /** The card account the network counts the card's attempts by (network.ts networkCardOf), when this is a charge of a saved card. */
  account: string | null;
}

/**
 * What the request charges. A saved card this sandbox does not hold (or whose first charge was
 * never authorized) and a network transaction id the network never issued are refused (400),
 * so nothing is charged: the merchant may try another PSP.
 */
async function chargedCard(deps: SandboxDeps, params: CreateChargeParams): Promise<ChargedCard> {
  if (params.network_transaction_id !== undefined) {
    const known = networkCardOf(deps.config.networkKey, params.network_transaction_id);
    if (known === null) throw invalidRequest('invalid_network_transaction_id', 'The card network does not know this network transaction id.');
    if ((known.last4 ?? testCard(known.card)?.last4) !== params.card?.last4) throw invalidRequest('card_mismatch', 'The card does not match the network transaction id.');
    return { testCard: known.card, savedCard: null, networkTransactionId: params.network_transaction_id, account: known.account };
  }
  const method = params.payment_method!;
  if (!method.startsWith('card_')) return { testCard: method, savedCard: null, networkTransactionId: null, account: null };
  const [saved] = await deps.sql<{ payment_method: string; network_transaction_id: string }[]>`
    SELECT s.payment_method, s.network_transaction_id
    FROM sandbox.saved_cards s JOIN sandbox.charges c ON c.id = s.charge_id
    WHERE s.id = ${method} AND c.authorized_at IS NOT NULL`;
  if (!saved) throw invalidRequest('invalid_payment_method', `No such saved card: '${method}'.`);
  const account = networkCardOf(deps.config.networkKey, saved.network_transaction_id)?.account ?? null;
  return { testCard: saved.payment_method, savedCard: method, networkTransactionId: saved.network_transaction_id, account };
}

/**
 * An off-session charge of a saved card is one attempt the card network counts (across every
 * sandbox on it): a card whose behaviour lives in the network gets the issuer's answer from it,
 * any other is recorded with its own answer. The answer says which rule a retry broke, if any.
 */
async function askNetwork(deps: SandboxDeps, key: string, card: ChargedCard, behaviour: PaymentMethodBehaviour): Promise<NetworkAnswer | null> {
  if (card.account === null) return null;
  const decline = behaviour.kind === 'decline' ? { code: behaviour.code, message: behaviour.message, networkCode: '05', category: null, adviceCode: null } : null;
  return networkAttempt(deps.networkSql, deps.config.networkTimeScale, {
    acquirer: deps.runtime.publicUrl,
    idempotencyKey: key,
    account: card.account,
    script: behaviour.kind === 'network' ? behaviour.script : null,
    decline,
  });
}

/**
 * A plain card's answer under the sandbox's approval rates (approval-rates.ts): approved, or
 * declined `do_not_honor` by the draw of the charge's key. Every other behaviour is the card's own.
 */
async function issuerAnswer(deps: SandboxDeps, key: string, card: ChargedCard, currency: string, behaviour: PaymentMethodBehaviour): Promise<PaymentMethodBehaviour> {
  const network = testCard(card.testCard)?.brand;
  if (behaviour.kind !== 'approve' || network === undefined) return behaviour;
  const rates = await readApprovalRates(deps.sql, deps.runtime.publicUrl);
  return issuerApproves(rates, { network, currency, idempotencyKey: key }) ? behaviour : issuerDecline;
}

/** The behaviour the network's answer gives a charge: its decline, or an approval. */
function networkBehaviour(behaviour: PaymentMethodBehaviour, answer: NetworkAnswer | null): PaymentMethodBehaviour {
  if (answer?.decline) return { kind: 'decline', code: answer.decline.code, message: answer.decline.message };
  return behaviour.kind === 'network' ? { kind: 'approve' } : behaviour;
}

async function insertCharge(
  tx: Tx,
  deps: SandboxDeps,
  key: string,
  params: CreateChargeParams,
  behaviour: PaymentMethodBehaviour,
  card: ChargedCard,
  network: NetworkAnswer | null,
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
  // A card saved now (setup_future_usage) is a new token with the network's id of this authorization.
  const saving = params.setup_future_usage !== undefined && status !== 'declined';
  const savedCard = saving ? newSavedCardId() : card.savedCard;
  const networkTransactionId = card.networkTransactionId ?? (saving ? issueNetworkTransactionId(deps.config.networkKey, card.testCard) : null);
  const challengeUrl = status === 'requires_action' ? `${deps.runtime.publicUrl}/challenge/${id}` : null;
  const [row] = await tx<ChargeRow[]>`
    INSERT INTO sandbox.charges (
      id, status, amount_minor, amount_captured_minor, currency, payment_method, reference,
      description, idempotency_key, failure_code, failure_message,
      capture, return_url, challenge_url, challenge_state, settle_at,
      off_session, saved_card, network_transaction_id,
      network_decline_code, decline_category, network_advice_code
    ) VALUES (
      ${id}, ${status}, ${params.amount_minor},
      ${status === 'succeeded' ? params.amount_minor : 0}, ${params.currency}, ${card.testCard},
      ${params.reference}, ${params.description ?? null}, ${key},
      ${decline?.code ?? null}, ${decline?.message ?? null},
      ${params.capture}, ${params.return_url ?? null}, ${challengeUrl}, ${challengeUrl ? 'pending' : null},
      ${status === 'processing' ? deps.sql`clock_timestamp() + ${deps.config.asyncSettleMs}::int * interval '1 millisecond'` : null},
      ${params.off_session ?? false}, ${savedCard}, ${networkTransactionId},
      ${network?.decline?.networkCode ?? null}, ${network?.decline?.category ?? null}, ${network?.decline?.adviceCode ?? null}
    )
    RETURNING *`;
  if (network?.excessive) {
    // The network charges the retry that broke its rule: a line in this PSP's report, no amount, the fee.
    await tx`
      INSERT INTO sandbox.balance_transactions (id, type, source, charge_id, reference, amount_minor, fee_minor, currency, available_at)
      VALUES (${newBalanceTransactionId()}, 'excessive_retry', ${id}, ${id}, ${params.reference}, 0, ${EXCESSIVE_RETRY_FEE_MINOR}, ${params.currency}, clock_timestamp())`;
  }
  if (saving) {
    await tx`
      INSERT INTO sandbox.saved_cards (id, payment_method, charge_id, network_transaction_id)
      VALUES (${savedCard}, ${card.testCard}, ${id}, ${networkTransactionId})`;
  }
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
      const card = await chargedCard(deps, params);
      if (params.setup_future_usage !== undefined && testCard(card.testCard) === null && paymentMethodBehaviour(card.testCard)) {
        throw invalidRequest('invalid_payment_method', `Only a card can be saved: '${card.testCard}' is none.`);
      }
      if (params.off_session && card.savedCard === null && card.networkTransactionId === null) {
        throw invalidRequest('invalid_request', 'off_session needs a saved card or a network transaction id: a new card is charged with its customer.');
      }
      const listed = paymentMethodBehaviour(card.testCard);
      const known = listed && params.off_session ? offSessionBehaviour(listed) : listed;
      if (!known) {
        throw invalidRequest('invalid_payment_method', `No such payment method: '${card.testCard}'.`);
      }
      // Outage `declining`: the processor fails every new charge, whatever the card, before it reaches the network.
      const declining = deps.runtime.outage === 'declining';
      const issued = declining ? known : await issuerAnswer(deps, key, card, params.currency, known);
      const network = params.off_session && !declining ? await askNetwork(deps, key, card, issued) : null;
      const behaviour: PaymentMethodBehaviour = declining
        ? { kind: 'decline', code: 'processing_error', message: 'An error occurred while processing the card (sandbox outage "declining").' }
        : params.off_session
          ? networkBehaviour(issued, network)
          : issued.kind === 'network'
            ? { kind: 'approve' }
            : issued;
      const scope = { endpoint: 'POST /v1/charges', key, fingerprint: requestFingerprint(params), ttlSeconds: config.idempotencyKeyTtlSeconds };

      const stored = await runIdempotently(
        sql,
        scope,
        (tx) => insertCharge(tx, deps, key, params, behaviour, card, network),
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
