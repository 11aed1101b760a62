import { describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { verifyWebhook, WebhookVerificationError } from '../../client';

/** The client's webhook helper against signatures made by the library the relay signs with. */

const newSecret = () => `whsec_${randomBytes(24).toString('base64')}`;
const event = { id: 'evt_1', object: 'event', type: 'payment.succeeded', created_at: '2026-01-01T00:00:00.000Z', data: { object: { id: 'pay_1', object: 'payment' } } };
const body = JSON.stringify(event);

function signed(secrets: string[], at = new Date()) {
  const signature = secrets.map((secret) => new Webhook(secret).sign(event.id, at, body)).join(' ');
  return { 'webhook-id': event.id, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': signature };
}

describe('verifyWebhook', () => {
  it('returns the typed event when a signature matches', () => {
    const secret = newSecret();
    const verified = verifyWebhook(secret, body, signed([secret]));
    expect(verified).toEqual(event);
    expect(verified.type).toBe('payment.succeeded');
    expect(verifyWebhook(secret, body, new Headers(signed([secret]))).id).toBe('evt_1');
  });

  it('accepts either of two signatures while the sender rotates its secret, and either of two secrets while the receiver rotates', () => {
    const old = newSecret();
    const rotated = newSecret();
    const during = signed([old, rotated]);
    expect(during['webhook-signature'].split(' ')).toHaveLength(2);
    expect(verifyWebhook(old, body, during).id).toBe('evt_1');
    expect(verifyWebhook(rotated, body, during).id).toBe('evt_1');
    expect(verifyWebhook([newSecret(), rotated], body, signed([rotated])).id).toBe('evt_1');
    expect(() => verifyWebhook(newSecret(), body, during)).toThrow(WebhookVerificationError);
  });

  it('refuses a tampered body, a foreign secret, an old timestamp, a body of another id and missing headers', () => {
    const secret = newSecret();
    const headers = signed([secret]);
    expect(() => verifyWebhook(secret, body.replace('pay_1', 'pay_2'), headers)).toThrow(/no signature matches/);
    expect(() => verifyWebhook(newSecret(), body, headers)).toThrow(/no signature matches/);
    expect(() => verifyWebhook(secret, body, signed([secret], new Date(Date.now() - 10 * 60_000)))).toThrow(/tolerance/);
    // Signed at the headers' own timestamp: a second that ticks between the two signings must not turn this into a signature mismatch.
    const other = { ...headers, 'webhook-id': 'evt_2', 'webhook-signature': new Webhook(secret).sign('evt_2', new Date(Number(headers['webhook-timestamp']) * 1000), body) };
    expect(() => verifyWebhook(secret, body, other)).toThrow(/not the event/);
    expect(() => verifyWebhook(secret, body, { 'webhook-id': 'evt_1' })).toThrow(/missing/);
  });
});
