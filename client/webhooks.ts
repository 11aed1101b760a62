import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Event } from './types';

/** The Standard Webhooks headers, as any HTTP framework hands them over (case-insensitive names). */
export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';
}

function header(headers: WebhookHeaders, name: string): string | null {
  if (headers instanceof Headers) return headers.get(name);
  const found = Object.entries(headers).find(([key]) => key.toLowerCase() === name)?.[1];
  return Array.isArray(found) ? (found[0] ?? null) : (found ?? null);
}

function secretBytes(secret: string): Buffer {
  return Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64');
}

/**
 * Verifies a webhook per Standard Webhooks and returns its event: the HMAC-SHA256 of
 * `${webhook-id}.${webhook-timestamp}.${body}` under the secret must match one of the
 * space-separated `v1,<base64>` signatures (while the sender rotates its secret it signs
 * with both), and the timestamp must be within `toleranceSeconds` of now (replays of an
 * old capture are refused). Give several secrets while you rotate yours. Verify the raw
 * body text exactly as received: re-serialized JSON does not match.
 */
export function verifyWebhook(
  secrets: string | string[],
  body: string,
  headers: WebhookHeaders,
  options: { toleranceSeconds?: number; now?: Date } = {},
): Event {
  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp');
  const signatures = header(headers, 'webhook-signature');
  if (!id || !timestamp || !signatures) throw new WebhookVerificationError('missing webhook-id, webhook-timestamp or webhook-signature');
  if (!/^\d{1,12}$/.test(timestamp)) throw new WebhookVerificationError('malformed webhook-timestamp');
  const nowSeconds = Math.floor((options.now ?? new Date()).getTime() / 1000);
  if (Math.abs(nowSeconds - Number(timestamp)) > (options.toleranceSeconds ?? 300)) throw new WebhookVerificationError('webhook-timestamp is outside the tolerance');

  const given = signatures
    .split(' ')
    .filter((s) => s.startsWith('v1,'))
    .map((s) => Buffer.from(s.slice(3), 'base64'));
  const signed = `${id}.${timestamp}.${body}`;
  const matches = [secrets]
    .flat()
    .map((secret) => createHmac('sha256', secretBytes(secret)).update(signed).digest())
    .some((expected) => given.some((signature) => signature.length === expected.length && timingSafeEqual(signature, expected)));
  if (!matches) throw new WebhookVerificationError('no signature matches');

  const event = JSON.parse(body) as Event;
  if (event?.object !== 'event' || event.id !== id) throw new WebhookVerificationError('the body is not the event named by webhook-id');
  return event;
}
