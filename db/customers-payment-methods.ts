import type { Db } from './connect';
import { keysetPage, toPage, type Page, type PageQuery } from './paging';
import { paymentMethodResource, type PaymentMethodRow } from '../domain/resources';
import { businessEventKey } from '../shared/keys';
import type { CardDetails } from '../shared/customers';
import { insertEvent } from './outbox';

/** A saved method's row with its card's last hard decline (tenant_cards): what its resource shows. */
const methodRows = (db: Db) => db`
  SELECT m.*, c.hard_decline_code, c.hard_declined_at, c.hard_decline_payment_id
  FROM payment_methods m LEFT JOIN tenant_cards c ON c.tenant_id = m.tenant_id AND c.card_key = m.card_key`;

/** A payment method's event (attached, detached), in the caller's transaction: once per method and type. */
export async function paymentMethodEvent(db: Db, method: PaymentMethodRow, type: 'payment_method.attached' | 'payment_method.detached'): Promise<void> {
  await insertEvent(db, { tenantId: method.tenant_id, type, eventKey: businessEventKey.paymentMethodEvent(method.id, type), object: paymentMethodResource(method) });
}

/**
 * Saves the card of a payment that succeeded for its customer (activities/payments.ts, in
 * the transaction that records the outcome). One method per source payment: a repeated step
 * finds it and saves nothing (null).
 */
export async function saveCard(
  db: Db,
  method: {
    id: string;
    tenantId: string;
    customerId: string;
    card: CardDetails;
    fingerprint: string | null;
    networkTransactionId: string;
    provider: string;
    token: string | null;
    sourcePaymentId: string;
  },
): Promise<PaymentMethodRow | null> {
  const tokens = method.token !== null ? { [method.provider]: method.token } : {};
  const [row] = await db<{ id: string }[]>`
    INSERT INTO payment_methods
      (id, tenant_id, customer_id, card_brand, card_last4, card_exp_month, card_exp_year, card_fingerprint, network_transaction_id, provider_tokens, source_payment_id)
    VALUES
      (${method.id}, ${method.tenantId}, ${method.customerId}, ${method.card.brand}, ${method.card.last4}, ${method.card.expMonth},
       ${method.card.expYear}, ${method.fingerprint || null}, ${method.networkTransactionId}, ${db.json(tokens)}, ${method.sourcePaymentId})
    ON CONFLICT (source_payment_id) DO NOTHING
    RETURNING id`;
  return row ? getPaymentMethod(db, method.tenantId, row.id) : null;
}

/** The tenant's payment method (detached ones included), or null (another tenant's included). */
export async function getPaymentMethod(db: Db, tenantId: string, id: string): Promise<PaymentMethodRow | null> {
  const [row] = await db<PaymentMethodRow[]>`${methodRows(db)} WHERE m.id = ${id} AND m.tenant_id = ${tenantId}`;
  return row ?? null;
}

/** The customer's attached payment methods, newest first. */
export async function listCustomerPaymentMethods(db: Db, tenantId: string, customerId: string, query: PageQuery): Promise<Page<PaymentMethodRow>> {
  const rows = await db<PaymentMethodRow[]>`
    ${methodRows(db)}
    WHERE m.tenant_id = ${tenantId} AND m.customer_id = ${customerId} AND m.detached_at IS NULL
      ${keysetPage(db, 'm.id', query)}`;
  return toPage(rows, query);
}

/**
 * Detaches the method, for good: it can no longer be charged. Returns the method and whether this
 * call detached it (false: it was detached before); null when the tenant has no such method.
 */
export async function detachPaymentMethod(db: Db, tenantId: string, id: string): Promise<{ method: PaymentMethodRow; detached: boolean } | null> {
  const [moved] = await db<{ id: string }[]>`
    UPDATE payment_methods SET detached_at = now()
    WHERE id = ${id} AND tenant_id = ${tenantId} AND detached_at IS NULL
    RETURNING id`;
  const method = await getPaymentMethod(db, tenantId, id);
  return method ? { method, detached: moved !== undefined } : null;
}

/** The id of the tenant's saved method `id` (null: not one of the tenant's methods). */
export async function tenantMethodId(db: Db, tenantId: string, id: string): Promise<string | null> {
  const [row] = await db<{ id: string }[]>`SELECT id FROM payment_methods WHERE id = ${id} AND tenant_id = ${tenantId}`;
  return row?.id ?? null;
}

/** The method saved from a payment (setup_future_usage), if any. */
export async function methodSavedFrom(db: Db, paymentId: string): Promise<string | null> {
  const [row] = await db<{ id: string }[]>`SELECT id FROM payment_methods WHERE source_payment_id = ${paymentId}`;
  return row?.id ?? null;
}
