import { z } from '@hono/zod-openapi';
import { isCurrency, MAX_AMOUNT_MINOR } from '../domain/money';
import { errorStatus } from '../domain/errors';
import type { PaymentResource, RefundResource } from '../domain/resources';
import { captureMethods, deliveryStatuses, eventTypes, paymentStatuses, refundStatuses } from '../shared/definitions';

/**
 * One zod schema per request: it validates in the API, its parsed output is the input the
 * fingerprint is computed over and the workflow receives, and it generates the OpenAPI
 * document. Unknown fields are refused, not ignored: a typo must not become a silent default.
 */

const amountMinor = z
  .number()
  .int('must be an integer number of minor units (e.g. cents)')
  .positive('must be greater than zero')
  .max(MAX_AMOUNT_MINOR, `must be at most ${MAX_AMOUNT_MINOR}`)
  .openapi({ description: 'Amount in minor units of the currency (e.g. cents), an integer.', example: 4999 });

const printable = /^[^\p{Cc}]*$/u;

const metadata = z
  .record(z.string().min(1).max(40).regex(/^[A-Za-z0-9_.-]+$/, 'metadata keys are letters, digits, _ . -'), z.string().max(500))
  .refine((m) => Object.keys(m).length <= 50, 'at most 50 metadata keys')
  .openapi({ description: 'Up to 50 string pairs for your own references.', example: { cart: 'c_123' } });

export const CreatePaymentBody = z
  .strictObject({
    order_id: z.string().min(1).max(255).regex(printable, 'no control characters').openapi({
      description: 'Your order. One live or paid payment per order, whatever the idempotency key.',
      example: 'ord_8f32',
    }),
    amount_minor: amountMinor,
    currency: z
      .string()
      .refine(isCurrency, 'must be an ISO 4217 currency code in upper case, e.g. "EUR"')
      .openapi({ description: 'ISO 4217 code, upper case.', example: 'EUR' }),
    payment_method: z
      .string()
      .regex(/^pm_[A-Za-z0-9_]{1,100}$/, 'must be a payment method token such as "pm_card_visa"')
      .openapi({ description: 'Payment method token from the provider.', example: 'pm_card_visa' }),
    capture_method: z.enum(captureMethods).default('automatic').openapi({
      description: '`automatic` captures at once; `manual` stops at `requires_capture` until you capture or cancel.',
    }),
    description: z.string().max(1000).regex(printable, 'no control characters').nullable().default(null),
    metadata: metadata.default({}),
  })
  .openapi('CreatePaymentRequest');
export type CreatePaymentBody = z.output<typeof CreatePaymentBody>;

export const CapturePaymentBody = z
  .strictObject({
    amount_minor: amountMinor.optional().openapi({ description: 'Capture only part of the authorization; all of it when omitted.' }),
  })
  .openapi('CapturePaymentRequest');

export const CancelPaymentBody = z.strictObject({}).openapi('CancelPaymentRequest');

export const CreateRefundBody = z
  .strictObject({
    amount_minor: amountMinor,
    reason: z.string().min(1).max(500).regex(printable, 'no control characters').nullable().default(null),
  })
  .openapi('CreateRefundRequest');

export const CreateTenantBody = z
  .strictObject({ name: z.string().min(1).max(200).regex(printable, 'no control characters').openapi({ example: 'Acme Shop' }) })
  .openapi('CreateTenantRequest');

export const UpdateTenantBody = z
  .strictObject({
    webhook_url: z
      .url({ protocol: /^https?$/, message: 'must be an http(s) URL' })
      .max(2000)
      .nullable()
      .optional()
      .openapi({ description: 'Where events are delivered; null stops deliveries.', example: 'https://example.com/webhooks' }),
    name: z.string().min(1).max(200).regex(printable).optional(),
  })
  .openapi('UpdateTenantRequest');

const limit = z.coerce.number().int().min(1).max(100).default(10).openapi({ description: '1 to 100, default 10.' });

/** Every list is newest first and walks both ways: one of the two cursors at a time. */
const paging = {
  limit,
  starting_after: z.string().max(64).optional().openapi({ description: 'An object id: the page continues after it (older objects).' }),
  ending_before: z
    .string()
    .max(64)
    .optional()
    .openapi({ description: 'An object id: the page just before it (newer objects), still listed newest first. Not with `starting_after`.' }),
};
const oneCursor = <T extends { starting_after?: string; ending_before?: string }>(query: T) => !(query.starting_after !== undefined && query.ending_before !== undefined);
const oneCursorIssue = { message: 'give starting_after or ending_before, not both', path: ['ending_before'] };

export const ListPaymentsQuery = z
  .strictObject({ order_id: z.string().min(1).max(255).optional(), ...paging })
  .refine(oneCursor, oneCursorIssue);

export const ListRefundsQuery = z.strictObject(paging).refine(oneCursor, oneCursorIssue);

export const ListEventsQuery = z
  .strictObject({
    type: z.enum(eventTypes).optional(),
    delivery_status: z.enum(deliveryStatuses).optional().openapi({
      description:
        '`pending` (being delivered or retried), `delivered` (acknowledged with a 2xx), `failed` (retries exhausted: ' +
        'resend it, or recover), `skipped` (no webhook endpoint was configured).',
    }),
    ...paging,
  })
  .refine(oneCursor, oneCursorIssue);

export const ListDeliveryAttemptsQuery = z.strictObject(paging).refine(oneCursor, oneCursorIssue);

export const RecoverEventsBody = z
  .strictObject({
    since: z.iso
      .datetime({ offset: true, message: 'must be an ISO 8601 date-time, e.g. "2026-01-31T00:00:00Z"' })
      .openapi({ description: 'Resend every event created at or after this time that no endpoint acknowledged.', example: '2026-01-31T00:00:00Z' }),
  })
  .openapi('RecoverEventsRequest');

export const ResendEventBody = z.strictObject({}).openapi('ResendEventRequest');

export const IdParam = (name: string, example: string) =>
  z.object({ id: z.string().max(64).openapi({ param: { name: 'id', in: 'path' }, description: `The ${name} id.`, example }) });

// Responses (documentation; the bodies are built by domain/resources.ts).

export const Failure = z.object({ code: z.string(), message: z.string() }).nullable();

export const Payment = z
  .object({
    id: z.string().openapi({ example: 'pay_01jd6w8b3m4x0c2q7yk5h9t1ve' }),
    object: z.literal('payment'),
    order_id: z.string(),
    amount_minor: z.number().int(),
    currency: z.string(),
    status: z.enum(paymentStatuses),
    capture_method: z.enum(captureMethods),
    amount_captured_minor: z.number().int(),
    amount_refunded_minor: z.number().int().openapi({ description: 'Pending and succeeded refunds.' }),
    payment_method: z.string(),
    description: z.string().nullable(),
    provider_charge_id: z.string().nullable(),
    failure: Failure,
    workflow_id: z.string().openapi({ description: 'The Temporal workflow of this payment (search it in the Web UI).' }),
    metadata: z.record(z.string(), z.string()),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .openapi('Payment');

export const Refund = z
  .object({
    id: z.string(),
    object: z.literal('refund'),
    payment_id: z.string(),
    amount_minor: z.number().int(),
    currency: z.string(),
    status: z.enum(refundStatuses),
    reason: z.string().nullable(),
    failure: Failure,
    workflow_id: z.string(),
    created_at: z.string(),
  })
  .openapi('Refund');

/**
 * The documented response shapes and the bodies domain/resources.ts builds are the same type:
 * a field added, removed or retyped on one side without the other fails the typecheck.
 */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const paymentSchemaMatchesResource: Same<z.output<typeof Payment>, PaymentResource> = true;
const refundSchemaMatchesResource: Same<z.output<typeof Refund>, RefundResource> = true;
void paymentSchemaMatchesResource;
void refundSchemaMatchesResource;

export const Event = z
  .object({
    id: z.string(),
    object: z.literal('event'),
    type: z.enum(eventTypes),
    created_at: z.string(),
    data: z.object({ object: z.union([Payment, Refund]) }),
  })
  .openapi('Event');

export const DeliveryAttempt = z
  .object({
    id: z.string().openapi({ example: 'wha_42' }),
    object: z.literal('delivery_attempt'),
    event_id: z.string(),
    attempt: z.number().int().openapi({ description: '1 for the first attempt; resends continue the count.' }),
    url: z.string(),
    response_status: z.number().int().nullable().openapi({ description: 'The endpoint’s HTTP status; null when no response came (see `error`).' }),
    error: z.string().nullable().openapi({ description: 'Why the attempt failed (non-2xx status, timeout, connection refused); null when acknowledged.' }),
    duration_ms: z.number().int(),
    created_at: z.string(),
  })
  .openapi('DeliveryAttempt');

export const EventDelivery = z
  .object({
    object: z.literal('event_delivery'),
    event_id: z.string(),
    delivery_status: z.enum(deliveryStatuses),
    attempts: z.number().int(),
    next_attempt_at: z.string().nullable().openapi({ description: 'When the relay tries next; null unless `pending`.' }),
    delivered_at: z.string().nullable(),
  })
  .openapi('EventDelivery');

export const EventRecovery = z
  .object({
    object: z.literal('event_recovery'),
    since: z.string(),
    resent: z.number().int().openapi({ description: 'How many unacknowledged events were given a new round of delivery.' }),
  })
  .openapi('EventRecovery');

export const listOf = <T extends z.ZodType>(item: T, name: string) =>
  z.object({ object: z.literal('list'), data: z.array(item), has_more: z.boolean() }).openapi(name);

export const Balance = z
  .object({
    object: z.literal('balance'),
    accounts: z.array(
      z.object({
        account: z.enum(['provider_receivable', 'merchant_balance']),
        currency: z.string(),
        balance_minor: z.number().int().openapi({ description: 'In the account’s normal direction.' }),
      }),
    ),
  })
  .openapi('Balance');

export const Tenant = z
  .object({
    id: z.string(),
    object: z.literal('tenant'),
    name: z.string(),
    api_key_prefix: z.string(),
    webhook_url: z.string().nullable(),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .openapi('Tenant');

export const CreatedTenant = Tenant.extend({
  api_key: z.string().openapi({ description: 'Shown once; only its hash is stored.' }),
  webhook_secret: z.string().openapi({ description: 'Standard Webhooks signing secret (whsec_…), shown once.' }),
}).openapi('CreatedTenant');

export const ErrorBody = z
  .object({
    error: z
      .object({
        type: z.enum(Object.keys(errorStatus) as [keyof typeof errorStatus, ...(keyof typeof errorStatus)[]]),
        message: z.string(),
      })
      .catchall(z.unknown()),
  })
  .openapi('Error');
