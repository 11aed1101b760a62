import { createHmac, timingSafeEqual } from 'node:crypto';
import { ProviderWebhookError, type ProviderWebhookEvent } from '../types';
import { toWebhookEvent } from './wire';

/** The header the sandbox signs its webhooks in: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`. */
export const sandboxSignatureHeader = 'sandbox-signature';

/** The signature header's value for a body (the sandbox's signer, and tests posing as the sandbox). */
export function signSandboxWebhook(rawBody: string, secret: string, timestampSeconds = Math.floor(Date.now() / 1000)): string {
  const digest = createHmac('sha256', secret).update(`${timestampSeconds}.${rawBody}`, 'utf8').digest('hex');
  return `t=${timestampSeconds},v1=${digest}`;
}

export interface SandboxWebhookSettings {
  /** The secret the sandbox signs its webhooks with; null: every webhook is refused. */
  secret: string | null;
  /** How old (or how far ahead) a signature's timestamp may be, in seconds. */
  toleranceSeconds: number;
}

const headerValue = (headers: Record<string, string | undefined>, name: string): string | undefined => {
  for (const [key, value] of Object.entries(headers)) if (key.toLowerCase() === name) return value;
  return undefined;
};

/**
 * The sandbox's webhook: `Sandbox-Signature: t=…,v1=…` (one or more v1) over "<t>.<raw body>"
 * with the shared secret, compared in constant time; a timestamp further than the tolerance
 * from `now` (either way) is stale, so a captured request cannot be replayed later. A verified
 * body is read through the wire mapping, which refuses a field it reads that is missing, null or
 * of another type (ProviderEventUnreadableError, with the field's path).
 */
export function verifySandboxWebhook(rawBody: string, headers: Record<string, string | undefined>, settings: SandboxWebhookSettings, now: Date = new Date()): ProviderWebhookEvent {
  const { secret, toleranceSeconds } = settings;
  if (!secret) throw new ProviderWebhookError('no webhook secret is configured for the sandbox (PROVIDER_<NAME>_WEBHOOK_SECRET or SANDBOX_WEBHOOK_SECRET)');
  const header = headerValue(headers, sandboxSignatureHeader);
  if (!header) throw new ProviderWebhookError(`missing ${sandboxSignatureHeader} header`);
  let timestamp: number | null = null;
  const signatures: string[] = [];
  for (const part of header.split(',')) {
    const at = part.indexOf('=');
    if (at < 0) continue;
    const [name, value] = [part.slice(0, at).trim(), part.slice(at + 1).trim()];
    if (name === 't' && /^\d{1,12}$/.test(value)) timestamp = Number(value);
    else if (name === 'v1' && /^[0-9a-f]{64}$/.test(value)) signatures.push(value);
  }
  if (timestamp === null || signatures.length === 0) throw new ProviderWebhookError(`malformed ${sandboxSignatureHeader} header`);
  const expected = Buffer.from(signSandboxWebhook(rawBody, secret, timestamp).slice(`t=${timestamp},v1=`.length), 'hex');
  if (!signatures.some((s) => timingSafeEqual(Buffer.from(s, 'hex'), expected))) {
    throw new ProviderWebhookError('no signature matches the body');
  }
  if (Math.abs(Math.floor(now.getTime() / 1000) - timestamp) > toleranceSeconds) {
    throw new ProviderWebhookError(`signature timestamp ${timestamp} is outside the ${toleranceSeconds} s tolerance`);
  }
  let body: unknown;
  try {
    body = JSON.parse(rawBody);
  } catch {
    throw new ProviderWebhookError('the body is not JSON');
  }
  return toWebhookEvent(body);
}
