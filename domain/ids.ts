import { createHash, randomBytes } from 'node:crypto';

const crockford = '0123456789abcdefghjkmnpqrstvwxyz';

/**
 * A new object id such as `pay_01jd…`: 48 bits of milliseconds then 80 random bits, in
 * lowercase Crockford base32. Ids sort by creation time, which gives list endpoints a
 * stable cursor order without a second column.
 */
export function newId(prefix: 'ten' | 'pay' | 're' | 'evt' | 'ltx' | 'req' | 'key' | 'rcn' | 'dsc' | 'dsp' | 'cus' | 'pm' | 'opr' | 'act', now = Date.now()): string {
  let time = '';
  for (let t = now, i = 0; i < 10; i++, t = Math.floor(t / 32)) time = crockford[t % 32] + time;
  const random = randomBytes(10);
  let rest = '';
  for (let i = 0; i < 16; i++) {
    // 5 bits at a time from the 80 random bits
    const bit = i * 5;
    const byte = bit >> 3;
    const word = ((random[byte] ?? 0) << 8) | (random[byte + 1] ?? 0);
    rest += crockford[(word >> (11 - (bit & 7))) & 31];
  }
  return `${prefix}_${time}${rest}`;
}

/** The shape of ids this service issues, to reject junk ids with a 404 before any query. */
export function looksLikeId(prefix: string, value: string): boolean {
  return value.length === prefix.length + 27 && value.startsWith(`${prefix}_`) && /^[0-9a-z]{26}$/.test(value.slice(prefix.length + 1));
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/**
 * The part of a workflow or update id that stands for an Idempotency-Key. Readable keys are
 * kept as they are so an operator can search for them; keys with characters that are
 * awkward in URLs and the Web UI are hashed. The `k.` / `h.` prefixes keep the two forms
 * from ever colliding.
 */
function keyPart(key: string): string {
  return /^[A-Za-z0-9_.:-]+$/.test(key) ? `k.${key}` : `h.${sha256Hex(key).slice(0, 40)}`;
}

/** The payment workflow for POST /v1/payments under (tenant, key): deterministic, names the tenant. */
export function paymentWorkflowId(tenantId: string, key: string): string {
  return `payment-${tenantId}-${keyPart(key)}`;
}

/** The refund workflow for POST /v1/payments/{id}/refunds under (tenant, key). */
export function refundWorkflowId(tenantId: string, key: string): string {
  return `refund-${tenantId}-${keyPart(key)}`;
}

/**
 * The late-charge workflow for one PSP charge (workflows/payments-late-charge.ts): every delivery of the
 * webhook that reports it lands on this one id, so the money is given back once.
 */
export function lateChargeWorkflowId(provider: string, chargeId: string): string {
  return `late-charge-${provider}-${keyPart(chargeId)}`;
}

/**
 * The workflow that acts on one stored PSP charge event (workflows/payments-charge-events.ts):
 * every delivery of the event lands on this one id, so it is decided once.
 */
export function chargeEventWorkflowId(provider: string, eventId: string): string {
  return `charge-event-${provider}-${keyPart(eventId)}`;
}

/**
 * The workflow that acts on one stored PSP report of a refund (workflows/refunds.ts
 * refundEventWorkflow), and on one stored PSP dispute event (workflows/disputes-events.ts
 * disputeEventWorkflow): one id per event, as for a charge's. Their prefix is no other
 * workflow's (a provider's name may hold '-', so `dispute-event-…` could be a dispute's id).
 */
export function refundEventWorkflowId(provider: string, eventId: string): string {
  return `event-refund-${provider}-${keyPart(eventId)}`;
}

export function disputeEventWorkflowId(provider: string, eventId: string): string {
  return `event-dispute-${provider}-${keyPart(eventId)}`;
}

/**
 * The dispute workflow of one PSP dispute (workflows/disputes.ts): every webhook about it, and the
 * reconciliation run that finds it, signal-with-start this one id, so duplicates join one run.
 */
export function disputeWorkflowId(provider: string, providerDisputeId: string): string {
  return `dispute-${provider}-${keyPart(providerDisputeId)}`;
}

/** The update id of a capture or cancel: a repeated delivery is deduplicated by Temporal. */
export function paymentUpdateId(command: 'capture' | 'cancel', key: string): string {
  return `${command}-${keyPart(key)}`;
}
