import { attemptOutcomes } from '../domain/payments-attempts';
import { NETWORK_CARD_LIMITS, RECOVERY_WINDOW_DAYS, SCHEDULE_LIMITS } from '../domain/recovery';
import { z } from '@hono/zod-openapi';
import { isCurrency, MAX_AMOUNT_MINOR } from '../domain/money';
import { errorStatus } from '../domain/errors';
import type { CustomerResource, DisputeResource, PaymentMethodResource, PaymentResource, RefundResource } from '../domain/resources';
import { disputeStages, disputeStatuses } from '../domain/disputes';
import type { EventPayload } from '../db/outbox';
import { deliveryStatuses, eventTypes } from '../shared/events';
import { refundStatuses } from '../shared/refunds';
import { captureMethods, paymentStatuses } from '../shared/payments';
import { discrepancyKinds, reconciliationRunStatuses } from '../shared/reconciliation';
import { chargeStates, paymentLifecycle } from '../domain/payments';
import { routingSchemas } from '../domain/routing';
import { storable, unstorableText } from '../domain/text';
import { kindsWhere } from '../provider/registry';

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

/**
 * Identifiers (order ids, tenant names) are compared, searched and shown to people: besides
 * control characters they refuse the invisible ones that make two different strings look
 * alike or reorder what is displayed: format characters (Unicode category Cf: bidi overrides
 * and isolates such as U+202E, zero-width spaces and joiners, the BOM, soft hyphens) and the
 * line and paragraph separators U+2028/U+2029. Free text (descriptions, refund reasons,
 * metadata values) keeps them.
 */
const visibleIdentifier = /^[^\p{Cc}\p{Cf}\p{Zl}\p{Zp}]*$/u;
const identifierMessage = 'no control, format (e.g. bidi U+202E, zero-width) or line-separator characters';
/** A string that names something: storable, and without invisible characters. */
const identifier = () => text().regex(visibleIdentifier, identifierMessage);

/**
 * PostgreSQL's timestamptz has no year 0 (it refuses "0000-01-01"); ISO 8601 without an
 * expanded year stops at 9999. zod's datetime already refuses impossible days (Feb 30); every
 * date input also lands, once its offset is applied, in 0001-01-01 .. 9999-12-31 UTC, so the
 * refusal names its field instead of coming back from the database.
 */
const timestamp = (example: string) =>
  z.iso.datetime({ offset: true, message: `must be an ISO 8601 date-time, e.g. "${example}"` }).refine((value) => {
    // Not an ISO date-time at all (an expanded year such as -000001): the format's issue says so.
    if (!/^\d{4}-/.test(value)) return true;
    const year = new Date(value).getUTCFullYear();
    return year >= 1 && year <= 9999;
  }, 'must lie between 0001-01-01 and 9999-12-31 (UTC), the dates PostgreSQL stores');

export { storable, unstorableText };
/** A string that PostgreSQL can store as given. Every string the API accepts starts here. */
export const text = () => z.string().refine((s) => !unstorableText.test(s), storable);

/**
 * The path ("data.object.description") of the first string or key PostgreSQL cannot store in
 * a parsed JSON value, or null: for bodies stored whole (a PSP's event, as jsonb) that no
 * schema of ours describes.
 */
export function unstorablePath(value: unknown, path: string[] = []): string | null {
  if (typeof value === 'string') return unstorableText.test(value) ? path.join('.') : null;
  if (value === null || typeof value !== 'object') return null;
  for (const [key, item] of Object.entries(value)) {
    if (unstorableText.test(key)) return [...path, key].join('.');
    const found = unstorablePath(item, [...path, key]);
    if (found !== null) return found;
  }
  return null;
}

// zod drops an own "__proto__" key from a record without an issue: it would vanish silently.
// A record of named strings (metadata, evidence) refuses it instead, by name (`what`).
const withoutProtoKey = (what: string) => (value: unknown, ctx: { addIssue: (issue: { code: 'custom'; message: string; path: string[]; input: unknown }) => void }) => {
  if (value !== null && typeof value === 'object' && Object.hasOwn(value, '__proto__')) {
    ctx.addIssue({ code: 'custom', message: `${what} key "__proto__" is reserved`, path: ['__proto__'], input: value });
  }
  return value;
};

const metadataRecord = z
  .record(
    z
      .string()
      .min(1)
      .max(40)
      .regex(/^[A-Za-z0-9_.-]+$/, 'metadata keys are letters, digits, _ . -'),
    text().max(500),
  )
  .refine((m) => Object.keys(m).length <= 50, 'at most 50 metadata keys')
  .openapi({ description: 'Up to 50 string pairs for your own references.', example: { cart: 'c_123' } });
const metadata = z.preprocess(withoutProtoKey('metadata'), metadataRecord);

/**
 * The longest return_url every configured PSP accepts: the sandbox PSP refuses more than 2000
 * characters (sandbox/routes/charges.ts); the card PSPs that state a maximum return_url length
 * state 5000. A longer one would only be refused by each PSP in turn (402
 * provider_rejected after the whole route), so the API refuses it first, with its path.
 */
export const RETURN_URL_MAX_LENGTH = 2000;

export const CreatePaymentBody = z
  .strictObject({
    order_id: identifier().min(1).max(255).openapi({
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
    description: text().max(1000).regex(printable, 'no control characters').nullable().default(null),
    metadata: metadata.default({}),
    // Optional without a default: a request without it keeps the fingerprint it always had.
    return_url: text()
      .max(RETURN_URL_MAX_LENGTH, `must be at most ${RETURN_URL_MAX_LENGTH} characters (the strictest configured PSP's limit)`)
      .refine(isReturnUrl, 'must be an https URL written scheme://host/… (http only on a loopback host, in development)')
      .optional()
      .openapi({
        description:
          'Where the PSP sends the customer back after a 3-D Secure challenge (`next_action.redirect_to_url.return_url`). ' +
          'https; plain http only on a loopback host (127.0.0.1, ::1, localhost) outside production.',
        example: 'https://shop.example/checkout/return',
      }),
    // Saved payment methods (docs/CONTRACT.md §3.9); optional without defaults, like return_url.
    customer: text().max(64).optional().openapi({
      description: 'The customer (`cus_…`) the payment is for: needed to save the card or to charge one they saved.',
      example: 'cus_01jd6w8b3m4x0c2q7yk5h9t1ve',
    }),
    setup_future_usage: z.literal('off_session').optional().openapi({
      description: 'Save the card for the `customer` once the payment succeeds (after any 3-D Secure): it becomes a payment method `pm_…` that later payments can charge with `off_session: true`.',
    }),
    off_session: z.boolean().optional().openapi({
      description:
        'The customer is not there: charge the saved `payment_method` of the `customer` without them. If the card issuer asks for authentication the payment fails ' +
        '(402 `authentication_required`) instead of waiting: bring the customer back to pay on-session.',
    }),
    recovery: z
      .strictObject({
        window_days: z.number().int().min(RECOVERY_WINDOW_DAYS.min).max(RECOVERY_WINDOW_DAYS.max).openapi({ description: 'How long the payment is retried after its first decline, in days.', example: 14 }),
      })
      .optional()
      .openapi({
        description:
          'Revenue recovery (with `off_session`): a soft decline (insufficient funds, try again later…) is retried within the card networks\' rules until paid or the window ends; ' +
          'the answer is 202 `recovering` with the `recovery` object. A hard decline (lost or stolen card, do not try again) answers 402 at once. ' +
          "Every attempt counts in the card's budget (10 in 24 hours, 15 in 30 days, or the tenant's lower limits), the first included: a card whose budget is full is not charged (402 `payment_failed`, `card_attempt_limit`). " +
          'Absent: the tenant\'s default window, if it set one. docs/recovery.md.',
      }),
  })
  .refine((body) => body.setup_future_usage === undefined || body.customer !== undefined, { message: 'setup_future_usage needs a customer to save the card for', path: ['customer'] })
  .refine((body) => body.off_session !== true || body.customer !== undefined, { message: 'off_session needs the customer whose saved payment method is charged', path: ['customer'] })
  .refine((body) => body.recovery === undefined || body.off_session === true, { message: 'recovery retries an off-session payment: it needs off_session: true', path: ['recovery'] })
  .refine((body) => body.recovery === undefined || body.capture_method !== 'manual', { message: 'recovery retries a payment captured at once: it needs capture_method automatic', path: ['recovery'] })
  .openapi('CreatePaymentRequest');

/**
 * https, or http on a loopback host (the API refuses the latter in production:
 * api/routes/payments.ts), written as a PSP reads it: `scheme://host…` with a real authority.
 * The URL parser repairs what PSPs refuse (`https:host/path` without the slashes, backslashes
 * for slashes, tabs and newlines dropped), so those are refused as written.
 */
export function isReturnUrl(value: string): boolean {
  if (!/^https?:\/\/[^/\\?#\s@]/i.test(value) || /[\s\\]/.test(value)) return false;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  if (url.username || url.password) return false;
  if (url.protocol === 'https:') return url.hostname.length > 0;
  return url.protocol === 'http:' && isLoopbackHost(url.hostname);
}

export function isLoopbackHost(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname);
}
export type CreatePaymentBody = z.output<typeof CreatePaymentBody>;

export const CreateCustomerBody = z
  .strictObject({
    email: text().max(512).regex(printable, 'no control characters').nullable().default(null).openapi({ example: 'jane@example.com' }),
    name: text().max(256).regex(printable, 'no control characters').nullable().default(null).openapi({ example: 'Jane Doe' }),
    metadata: metadata.default({}),
  })
  .openapi('CreateCustomerRequest');

export const DetachPaymentMethodBody = z.strictObject({}).openapi('DetachPaymentMethodRequest');

export const CapturePaymentBody = z
  .strictObject({
    amount_minor: amountMinor.optional().openapi({ description: 'Capture only part of the authorization; all of it when omitted.' }),
  })
  .openapi('CapturePaymentRequest');

export const CancelPaymentBody = z.strictObject({}).openapi('CancelPaymentRequest');

export const CreateRefundBody = z
  .strictObject({
    amount_minor: amountMinor,
    reason: text().min(1).max(500).regex(printable, 'no control characters').nullable().default(null),
  })
  .openapi('CreateRefundRequest');

export const CreateTenantBody = z
  .strictObject({ name: identifier().min(1).max(200).openapi({ example: 'Acme Shop' }) })
  .openapi('CreateTenantRequest');

const perSecond = z.number().int().min(1).max(1_000_000).nullable();
/** A tenant's recovery limit: a positive integer up to its ceiling (the networks' or the schedule's: a tenant may lower it, never raise it); null: the ceiling. */
const tenantLimit = (ceiling: number, what: string) =>
  z.number().int().min(1).max(ceiling, `must be at most ${ceiling}, ${what}: a tenant may set lower, never higher`).nullable().optional();

/** A tenant's routing across the deployment's PSPs (domain/routing.ts; docs/CONTRACT.md "Routing"). */
export const TenantRouting = routingSchemas(z).Routing.openapi('Routing', {
  description:
    'Which PSP a payment goes to, and in which order the others are tried. The first rule whose conditions all hold gives the list; ' +
    "otherwise the split draws the first provider by weight (from a hash of the payment id: the same payment always draws the same) and fallback orders the rest; " +
    'otherwise fallback alone. Providers must be configured (PROVIDERS); each list is non-empty and without duplicates; weights are integers ≥ 0, not all 0; ' +
    'amount ranges are [gte, lt) with gte < lt; unknown keys are refused.',
  example: {
    fallback: ['sandbox-a', 'sandbox-b'],
    split: [
      { provider: 'sandbox-a', weight: 70 },
      { provider: 'sandbox-b', weight: 30 },
    ],
    rules: [{ when: { currency: ['EUR'], payment_method_prefix: 'pm_sepa', amount_minor: { gte: 0, lt: 100000 } }, fallback: ['sandbox-b'] }],
  },
});

export const UpdateTenantBody = z
  .strictObject({
    webhook_url: text()
      .max(2000)
      .nullable()
      .optional()
      .openapi({
        format: 'uri',
        description:
          'Where events are delivered; null stops deliveries. https only (http where the operator allows it), no credentials; ' +
          'the host must resolve, and only to global unicast addresses (every block of the IANA IPv4 and IPv6 special-purpose ' +
          'registries is refused, and IPv6 outside 2000::/3, unless WEBHOOK_ALLOWED_CIDRS allows it). Checked again at each delivery.',
        example: 'https://example.com/webhooks',
      }),
    name: identifier().min(1).max(200).optional(),
    rate_limits: z
      .strictObject({
        read_per_second: perSecond.optional().openapi({ description: 'GET requests per second; null: the default.' }),
        write_per_second: perSecond.optional().openapi({ description: 'POST requests per second; null: the default.' }),
      })
      .optional()
      .openapi({ description: 'Per-tenant rate limits, per API process (docs/security.md).', example: { read_per_second: 100, write_per_second: 25 } }),
    routing: TenantRouting.nullable().optional().openapi({ description: "The tenant's routing across the configured PSPs (replaced whole); null clears it (the first configured PSP first)." }),
    recovery: z
      .strictObject({
        window_days: z.number().int().min(RECOVERY_WINDOW_DAYS.min).max(RECOVERY_WINDOW_DAYS.max).nullable().optional().openapi({
          description: 'The recovery window an off-session, automatic-capture payment gets when its request omits `recovery`; null: none (no recovery unless asked).',
        }),
        per_day: tenantLimit(NETWORK_CARD_LIMITS.perDay, "the card networks' limit").openapi({ description: `Attempts per card in 24 hours, at most ${NETWORK_CARD_LIMITS.perDay} (the networks'); null: ${NETWORK_CARD_LIMITS.perDay}.` }),
        per_30_days: tenantLimit(NETWORK_CARD_LIMITS.perMonth, "the card networks' limit").openapi({ description: `Attempts per card in 30 days, at most ${NETWORK_CARD_LIMITS.perMonth}; null: ${NETWORK_CARD_LIMITS.perMonth}.` }),
        max_retries: tenantLimit(SCHEDULE_LIMITS.maxRetries, "the schedule's").openapi({ description: `Retries of one payment, at most ${SCHEDULE_LIMITS.maxRetries} (the schedule's); null: ${SCHEDULE_LIMITS.maxRetries}.` }),
      })
      .optional()
      .openapi({
        description: "The tenant's revenue recovery settings (docs/recovery.md): only the fields sent change. A limit above the networks' is 400 `invalid_request` naming the field in `issues` (`recovery.per_day`), and nothing changes.",
        example: { window_days: 14, per_day: 5, per_30_days: 10 },
      }),
  })
  .openapi('UpdateTenantRequest');

export const CreateApiKeyBody = z.strictObject({}).openapi('CreateApiKeyRequest');

export const RotateWebhookSecretBody = z
  .strictObject({
    overlap_seconds: z
      .number()
      .int()
      .min(0)
      .max(7 * 24 * 3600)
      .default(24 * 3600)
      .openapi({ description: 'How long deliveries also carry a signature made with the old secret (default 24 h, at most 7 days).' }),
  })
  .openapi('RotateWebhookSecretRequest');

export const TenantKeyParams = z.object({
  id: text().max(64).openapi({ param: { name: 'id', in: 'path' }, description: 'The tenant id.', example: 'ten_01jd6w8b3m4x0c2q7yk5h9t1ve' }),
  key_id: text().max(64).openapi({ param: { name: 'key_id', in: 'path' }, description: 'The API key id.', example: 'key_01jd6w8b3m4x0c2q7yk5h9t1ve' }),
});

const limit = z.coerce.number().int().min(1).max(100).default(10).openapi({ description: '1 to 100, default 10.' });

/** Every list is newest first and walks both ways: one of the two cursors at a time. */
const paging = {
  limit,
  starting_after: text().max(64).optional().openapi({ description: 'An object id: the page continues after it (older objects).' }),
  ending_before: text()
    .max(64)
    .optional()
    .openapi({ description: 'An object id: the page just before it (newer objects), still listed newest first. Not with `starting_after`.' }),
};
const oneCursor = <T extends { starting_after?: string; ending_before?: string }>(query: T) => !(query.starting_after !== undefined && query.ending_before !== undefined);
const oneCursorIssue = { message: 'give starting_after or ending_before, not both', path: ['ending_before'] };

export const ListPaymentsQuery = z
  .strictObject({ order_id: identifier().min(1).max(255).optional(), ...paging })
  .refine(oneCursor, oneCursorIssue);

export const ListRefundsQuery = z.strictObject(paging).refine(oneCursor, oneCursorIssue);

/** Evidence: named text fields (`uncategorized_text`, `product_description`, …). */
export const DisputeEvidenceBody = z
  .strictObject({
    evidence: z.preprocess(
      withoutProtoKey('evidence'),
      z
        .record(z.string().regex(/^[a-z][a-z0-9_]{0,63}$/, 'a snake_case field name'), text().max(20_000))
        .refine((e) => Object.keys(e).length <= 50, 'at most 50 fields')
        .openapi({ example: { uncategorized_text: 'The customer signed for the delivery.' } }),
    ),
    submit: z.boolean().default(false).openapi({ description: '`true`: sent to the network for its decision (the dispute is then `under_review`); `false`: staged.' }),
  })
  .openapi('DisputeEvidenceBody');

export const ListDisputesQuery = z
  .strictObject({
    payment_id: text().max(64).optional().openapi({ description: 'Only the disputes of this payment.' }),
    status: z.enum(disputeStatuses).optional(),
    ...paging,
  })
  .refine(oneCursor, oneCursorIssue);
export const ListPaymentMethodsQuery = z.strictObject(paging).refine(oneCursor, oneCursorIssue);

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

/** A tenant's API keys are few and listed whole (oldest first, `has_more` false): the list takes no query parameters and refuses any. */
export const ListApiKeysQuery = z.strictObject({});

export const RecoverEventsBody = z
  .strictObject({
    since: timestamp('2026-01-31T00:00:00Z')
      .openapi({ description: 'Resend every event created at or after this time that no endpoint acknowledged.', example: '2026-01-31T00:00:00Z' }),
  })
  .openapi('RecoverEventsRequest');

export const ResendEventBody = z.strictObject({}).openapi('ResendEventRequest');

export const IdParam = (name: string, example: string) =>
  z.object({ id: text().max(64).openapi({ param: { name: 'id', in: 'path' }, description: `The ${name} id.`, example }) });

// Responses (documentation; the bodies are built by domain/resources.ts).

export const Failure = z.object({ code: z.string(), message: z.string() }).nullable();

/** What the customer must do while the payment is `requires_action` (a redirect to the PSP's page); null otherwise. */
export const NextAction = z
  .object({
    type: z.literal('redirect_to_url'),
    redirect_to_url: z.object({
      url: z.string().openapi({ description: 'Send the customer here to authenticate (3-D Secure challenge).' }),
      return_url: z.string().nullable().openapi({ description: 'Where the challenge sends the customer back (your `return_url`).' }),
    }),
  })
  .nullable()
  .openapi('NextAction');

export const PaymentAttempt = z
  .object({
    attempt: z.number().int().openapi({ description: '1, 2, …: attempt n charged under its own idempotency key at its PSP.' }),
    provider: z.string().openapi({ example: 'sandbox-a' }),
    provider_charge_id: z.string().nullable(),
    outcome: z.enum(attemptOutcomes).openapi({
      description:
        '`pending`: awaiting the PSP’s answer (while its outcome is unknown the payment keeps asking that PSP, never another); the charge’s status ' +
        `(${chargeStates.map((s) => `\`${s}\``).join(', ')}); or why nothing was charged there and the payment moved on: ` +
        '`rejected` (the PSP refused the request), `not_sent` (unreachable before anything was sent), `not_charged` (answers lost, its lookup found no charge).',
    }),
    error_code: z.string().nullable().openapi({ description: 'The decline or refusal code, or `connection_refused` / `psp_error_none_found` / `outcome_unknown_none_found`.' }),
    started_at: z.string(),
    finished_at: z.string().nullable(),
  })
  .openapi('PaymentAttempt');

const Recovery = z
  .object({
    attempts: z.number().int().openapi({ description: 'Attempts so far, the first included.' }),
    next_attempt_at: z.string().nullable().openapi({ description: 'When the next retry may go; null once it stopped or was paid.' }),
    window_ends_at: z.string().openapi({ description: 'No attempt at or after this time.' }),
    last_decline: z.object({
      code: z.string(),
      network_decline_code: z.string().nullable(),
      decline_category: z.number().int().nullable().openapi({ description: "Visa's decline category (1: never retried)." }),
      network_advice_code: z.string().nullable().openapi({ description: "Mastercard's Merchant Advice Code (03, 21: never retried; 24–30: wait)." }),
    }),
    stopped_because: z.enum(['hard_decline', 'authentication_required', 'window_elapsed', 'retry_limit']).nullable(),
  })
  .openapi('Recovery');

const RoutingDecision = z
  .object({
    strategy: z.enum(['static', 'success_rate']),
    candidates: z
      .array(
        z.object({
          provider: z.string(),
          approval_estimate: z.number().nullable().openapi({ description: "The PSP's approval estimate for the payment's segment when it was decided (posterior mean over the shared counts)." }),
          selection_probability: z.number().openapi({ description: 'The probability the decision chose it with; the candidates’ add up to 1.' }),
        }),
      )
      .openapi({ description: 'Every candidate of the tenant’s routing for the payment.' }),
    chosen: z.string().openapi({ description: 'The PSP tried first.' }),
    explored: z.boolean().openapi({ description: 'True when the chosen PSP is not the one the estimates rank first (the exploration floor, or a probe).' }),
    reason: z.string(),
  })
  .openapi('RoutingDecision');

export const Payment = z
  .object({
    id: z.string().openapi({ example: 'pay_01jd6w8b3m4x0c2q7yk5h9t1ve' }),
    object: z.literal('payment'),
    order_id: z.string(),
    amount_minor: z.number().int(),
    currency: z.string(),
    status: z.enum(paymentStatuses).openapi({ description: paymentStatuses.map((s) => `\`${s}\`: ${paymentLifecycle[s].meaning}`).join(' ') }),
    capture_method: z.enum(captureMethods),
    amount_captured_minor: z.number().int(),
    amount_refunded_minor: z.number().int().openapi({ description: 'Pending and succeeded refunds.' }),
    payment_method: z.string(),
    description: z.string().nullable(),
    provider_charge_id: z.string().nullable().openapi({
      description: 'The PSP’s id of the payment’s charge: its latest attempt’s (a recovering payment’s latest retry’s; null when that retry made none, or while the PSP has not named the charge: a PSP whose challenge comes back to the orchestrator may name a payment waiting for its 3-D Secure redirect only once it is decided).',
    }),
    provider: z.string().nullable().openapi({
      description: 'The configured PSP holding the payment’s charge (the one captures, cancels and refunds go to); null until the first attempt begins.',
      example: 'sandbox-a',
    }),
    failure: Failure,
    next_action: NextAction,
    customer: z.string().nullable().openapi({ description: 'The customer (`cus_…`) the payment is for; null when none was named.' }),
    setup_future_usage: z.literal('off_session').nullable().openapi({ description: '`off_session`: the card is saved for the `customer` once the payment succeeds.' }),
    off_session: z.boolean().openapi({ description: 'Charged without the customer: a saved payment method, merchant-initiated.' }),
    recovery: Recovery.optional().openapi({ description: 'A payment that recovered (or recovers) a soft decline: where its retries stand.' }),
    routing: RoutingDecision.optional().openapi({ description: 'A payment of a tenant whose routing decides by success rate: the decision that sent it where it went, made once by its first charge step and recorded in its run’s history.' }),
    workflow_id: z.string().openapi({ description: 'The Temporal workflow of this payment (search it in the Web UI).' }),
    metadata: z.record(z.string(), z.string()),
    created_at: z.string(),
    updated_at: z.string(),
    attempts: z.array(PaymentAttempt).optional().openapi({ description: 'GET /v1/payments/{id} only: every attempt to charge the payment at a PSP, in order.' }),
  })
  .openapi('Payment');

export const Refund = z
  .object({
    id: z.string(),
    object: z.literal('refund'),
    payment_id: z.string(),
    amount_minor: z.number().int(),
    currency: z.string(),
    status: z.enum(refundStatuses).openapi({
      description:
        '`pending` until the PSP confirms it (its amount reserved on the payment, nothing posted to the ledger): at a PSP whose refunds are confirmed by ' +
        'notification (kinds ' + kindsWhere((c) => c.modifications === 'notified') + ') until its notification of the refund, for up to seven days, ' +
        'and left `pending` for an operator if none comes; ' +
        '`succeeded` (the ledger reversal posted) or `failed` (the reservation given back) as the PSP said.',
    }),
    reason: z.string().nullable(),
    failure: Failure,
    workflow_id: z.string(),
    created_at: z.string(),
  })
  .openapi('Refund');

export const Dispute = z
  .object({
    id: z.string(),
    object: z.literal('dispute'),
    payment_id: z.string(),
    provider: z.string().openapi({ description: 'The PSP that holds the disputed charge (after a failover: the one that charged).' }),
    amount_minor: z.number().int(),
    currency: z.string(),
    reason: z.string().openapi({ description: 'The network’s reason, e.g. `fraudulent`.' }),
    stage: z.enum(disputeStages).openapi({
      description:
        '`inquiry`: a question from the issuer, no money moved; `chargeback`: the funds were withdrawn; `pre_arbitration`: the network\'s second round after a defended chargeback ' +
        '(a second chargeback, or a pre-arbitration won or lost), which may follow a chargeback closed `won` and take the funds again.',
    }),
    status: z.enum(disputeStatuses).openapi({ description: 'Only moves forward: needs_response → under_review → won | lost (an inquiry may escalate to a chargeback).' }),
    evidence_due_by: z.string(),
    evidence_submitted_at: z.string().nullable(),
    hold: z
      .object({
        reason: z.string(),
        released_at: z.string().nullable(),
      })
      .nullable()
      .openapi({
        description:
          'Set when the PSP\'s word on the dispute disagrees with the payment (another currency, a disputed total past the captured amount) or with the dispute as recorded ' +
          '(another charge, amount or currency): the dispute is recorded and its payment flagged `needs_operator`, and nothing of it is posted to the ledger or sent as an event ' +
          'while `released_at` is null. An operator releases it with `POST /admin/disputes/{id}/release`; it is then booked as the PSP reports it.',
      }),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .openapi('Dispute');
export const Customer = z
  .object({
    id: z.string().openapi({ example: 'cus_01jd6w8b3m4x0c2q7yk5h9t1ve' }),
    object: z.literal('customer'),
    email: z.string().nullable(),
    name: z.string().nullable(),
    metadata: z.record(z.string(), z.string()),
    created_at: z.string(),
  })
  .openapi('Customer');

export const PaymentMethod = z
  .object({
    id: z.string().openapi({ example: 'pm_01jd6w8b3m4x0c2q7yk5h9t1ve', description: 'Ours, never a PSP\'s token.' }),
    object: z.literal('payment_method'),
    customer: z.string(),
    card: z.object({ brand: z.string(), last4: z.string(), exp_month: z.number().int(), exp_year: z.number().int() }).openapi({
      description: 'All that is kept of the card: no number, no PSP token or network transaction id is ever shown.',
    }),
    detached_at: z.string().nullable().openapi({ description: 'Set once detached: it can no longer be charged.' }),
    off_session_unusable: z
      .object({
        decline_code: z.string().openapi({ description: 'The hard decline the card got off-session (`authentication_required`, `stolen_card`, `do_not_honor` with Mastercard advice 03…).', example: 'authentication_required' }),
        action: z.enum(['authenticate_on_session', 'new_card']).openapi({
          description: '`authenticate_on_session`: the issuer asks for the customer; charge the card with the customer present. `new_card`: the issuer will never approve it; ask the customer for another card.',
        }),
        message: z.string(),
        since: z.string().openapi({ description: 'When the decline came.' }),
        payment: z.string().nullable().openapi({ description: 'The payment whose charge got the decline.' }),
      })
      .nullable()
      .openapi({
        description:
          "Set while the card is not charged off-session: its last off-session charge (of this method or another copy of the same card) got a hard decline. An off-session payment of it then ends at once with nothing charged, as that decline would (402: `authentication_required` fails it, any other declines it). Cleared when a payment with the card succeeds on-session. docs/recovery.md.",
      }),
    created_at: z.string(),
  })
  .openapi('PaymentMethod');

/**
 * The documented response shapes and the bodies domain/resources.ts builds are the same type:
 * a field added, removed or retyped on one side without the other fails the typecheck.
 */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const paymentSchemaMatchesResource: Same<z.output<typeof Payment>, PaymentResource> = true;
const refundSchemaMatchesResource: Same<z.output<typeof Refund>, RefundResource> = true;
const customerSchemaMatchesResource: Same<z.output<typeof Customer>, CustomerResource> = true;
const paymentMethodSchemaMatchesResource: Same<z.output<typeof PaymentMethod>, PaymentMethodResource> = true;
void paymentSchemaMatchesResource;
void refundSchemaMatchesResource;
const disputeSchemaMatchesResource: Same<z.output<typeof Dispute>, DisputeResource> = true;
void disputeSchemaMatchesResource;
void customerSchemaMatchesResource;
void paymentMethodSchemaMatchesResource;

export const Event = z
  .object({
    id: z.string(),
    object: z.literal('event'),
    type: z.enum(eventTypes),
    created_at: z.string(),
    data: z.object({ object: z.union([Payment, Refund, Dispute, PaymentMethod]) }),
  })
  .openapi('Event');
// The stored event payload (db/outbox.ts) is what GET /v1/events/{id} and the webhooks send.
const eventSchemaMatchesPayload: Same<z.output<typeof Event>, EventPayload> = true;
void eventSchemaMatchesPayload;

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
        account: z.enum(['provider_receivable', 'merchant_balance', 'dispute_claim', 'dispute_reserve']),
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
    rate_limits: z
      .object({ read_per_second: z.number().int(), write_per_second: z.number().int() })
      .openapi({ description: 'The limits in force (the tenant’s own, or the defaults).' }),
    routing: TenantRouting.nullable().openapi({ description: "The tenant's routing; null: none (the first configured PSP first)." }),
    recovery: z
      .object({
        window_days: z.number().int().nullable().openapi({ description: 'The default recovery window; null: none.' }),
        per_day: z.number().int(),
        per_30_days: z.number().int(),
        max_retries: z.number().int(),
      })
      .openapi({ description: 'Revenue recovery: the default window and the limits in force (the tenant’s own, or the networks’).' }),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .openapi('Tenant');

export const RoutingEstimates = z
  .object({
    object: z.literal('routing_estimates'),
    tenant: z.string().nullable().openapi({ description: 'The tenant asked about (`?tenant=`); null: the pool.' }),
    scope: z.enum(['pooled', 'tenant']).openapi({ description: "Whose outcomes these are: every tenant's (pooled), or the tenant's own (its routing.scope is \"tenant\")." }),
    strategy: z.enum(['static', 'success_rate']).nullable().openapi({ description: "The tenant's strategy; null without `?tenant=`." }),
    segments: z.array(
      z.object({
        segment: z.string().openapi({ description: 'A segment level: network:currency:method type, `*` for any (e.g. `visa:EUR:card`, `visa:*:card`, `*:*:card`, `*:*:*`).', example: 'visa:EUR:card' }),
        providers: z.array(
          z.object({
            provider: z.string(),
            approval_estimate: z.number().openapi({ description: 'The posterior mean of its approval rate at this level now: Beta(1 + approvals, 1 + declines) over the recency-weighted counts.' }),
            outcomes: z.number().openapi({ description: 'The recency-weighted outcomes the estimate rests on.' }),
            share: z.number().openapi({ description: "Its share of this level's recency-weighted outcomes across PSPs." }),
            approvals: z.number().int().openapi({ description: 'First attempts the issuer approved, counted since the start.' }),
            declines: z.number().int(),
            errors: z.number().int().openapi({ description: "The PSP's own errors (timeouts, 5xx, refused connections) at first attempts." }),
          }),
        ),
      }),
    ),
    health: z.array(
      z.object({
        provider: z.string(),
        state: z.enum(['closed', 'open', 'half_open']).openapi({ description: 'closed: in; open: out of first place for new payments (its errors); half_open: one payment at a time probes it.' }),
        reason: z.string().nullable(),
        eliminated_until: z.string().nullable(),
      }),
    ),
  })
  .openapi('RoutingEstimates');

export const ApiKey = z
  .object({
    id: z.string(),
    object: z.literal('api_key'),
    prefix: z.string().openapi({ description: 'The first characters of the key, to recognise it.' }),
    created_at: z.string(),
    last_used_at: z.string().nullable().openapi({ description: 'Last authentication with it (to a few seconds).' }),
    revoked_at: z.string().nullable(),
  })
  .openapi('ApiKey');

export const CreatedApiKey = ApiKey.extend({ api_key: z.string().openapi({ description: 'The key, shown once; only its hash is stored.' }) }).openapi('CreatedApiKey');

export const RotatedWebhookSecret = z
  .object({
    object: z.literal('webhook_secret'),
    webhook_secret: z.string().openapi({ description: 'The new signing secret (whsec_…), shown once.' }),
    previous_secret_valid_until: z.string().openapi({ description: 'Until then deliveries carry a signature with the old secret too.' }),
  })
  .openapi('RotatedWebhookSecret');

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

// Reconciliation with the PSP (admin; docs/CONTRACT.md "Reconciliation").

export const ListReconciliationRunsQuery = z
  .strictObject({ provider: text().min(1).max(64).optional().openapi({ description: 'Only this provider’s runs (e.g. `sandbox-a`).' }), ...paging })
  .refine(oneCursor, oneCursorIssue);

const Figures = z
  .record(z.string(), z.unknown())
  .nullable()
  .openapi({ description: 'That side’s figures (amounts in minor units, currency, status, ids); null when that side has no such object.' });

export const ReconciliationRun = z
  .object({
    id: z.string().openapi({ example: 'rcn_01jd6w8b3m4x0c2q7yk5h9t1ve' }),
    object: z.literal('reconciliation_run'),
    provider: z.string().openapi({ example: 'sandbox' }),
    window: z.object({ from: z.string(), to: z.string() }).openapi({ description: 'The time window reconciled: balance transactions created in [from, to).' }),
    status: z.enum(reconciliationRunStatuses).openapi({
      description: '`running`; `clean` (no difference); `discrepancies` (see `discrepancy_count`); `failed` (the run could not finish: `error`).',
    }),
    started_at: z.string(),
    finished_at: z.string().nullable(),
    discrepancy_count: z.number().int(),
    provider_transactions: z.number().int().openapi({ description: 'Balance transactions read from the PSP’s report (the window and a margin on each side).' }),
    workflow_id: z.string().openapi({ description: 'The Temporal workflow that ran it (its Schedule’s id plus the scheduled time).' }),
    error: z.string().nullable(),
  })
  .openapi('ReconciliationRun');

export const Discrepancy = z
  .object({
    id: z.string().openapi({ example: 'dsc_01jd6w8b3m4x0c2q7yk5h9t1ve' }),
    object: z.literal('reconciliation_discrepancy'),
    kind: z.enum(discrepancyKinds),
    payment_id: z.string().nullable().openapi({ description: 'Our payment, when there is one.' }),
    refund_id: z.string().nullable(),
    provider_reference: z.string().nullable().openapi({ description: 'The PSP’s charge or refund id, when there is one.' }),
    ours: Figures,
    provider: Figures,
    first_run_id: z.string().openapi({ description: 'The run that first recorded it for this window: a re-run finds the same discrepancy, not a copy.' }),
    created_at: z.string(),
  })
  .openapi('ReconciliationDiscrepancy');

export const ReconciliationRunDetail = ReconciliationRun.extend({ discrepancies: z.array(Discrepancy) }).openapi('ReconciliationRunDetail');

// The console's operators (docs/console.md): created and managed with the admin token.

const operatorPassword = text()
  .min(12, 'must be at least 12 characters')
  .max(200)
  .openapi({ description: 'At least 12 characters; stored as a scrypt hash, never returned.', example: 'correct horse battery staple' });

export const CreateOperatorBody = z
  .strictObject({
    email: z
      .email()
      .max(254)
      .transform((email) => email.toLowerCase())
      .openapi({ example: 'ops@example.com', description: 'Signs in with it; unique, compared case-insensitively.' }),
    role: z.enum(['viewer', 'operator']).openapi({ description: '`viewer` reads only; `operator` may also act (refund).' }),
    tenant_id: text().max(64).nullable().optional().openapi({ description: 'Sees only this tenant; absent or null: every tenant (and the Temporal UI and trace links).' }),
    password: operatorPassword,
  })
  .openapi('CreateOperatorRequest');

export const OperatorPasswordBody = z.strictObject({ password: operatorPassword }).openapi('OperatorPasswordRequest');

export const Operator = z
  .object({
    id: z.string(),
    object: z.literal('operator'),
    email: z.string(),
    role: z.enum(['viewer', 'operator']),
    tenant_id: z.string().nullable(),
    disabled: z.boolean(),
    password_changed_at: z.string(),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .openapi('Operator');
