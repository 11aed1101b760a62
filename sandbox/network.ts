import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * The simulated card network the sandboxes share, without a shared database: a network
 * transaction id names the test card it was issued for and carries an HMAC-SHA256 under the
 * network key (SANDBOX_NETWORK_KEY) every sandbox on the network is given. Any of them can then
 * tell which card an id stands for, and refuse one the network never issued, as a real scheme
 * recognises its own transaction ids.
 *
 * A PSP on the network that is no sandbox (a PSP double, doubles/<kind>/network.ts) is given
 * the same key and issues its ids the same way, for its own card number of the test card: the id
 * then carries that number's last four digits, which a charge by the id must name.
 *
 * Form: `ntx_<base64url of {"card","nonce"[,"last4"]}>.<32 hex of the HMAC>`.
 */
export const DEFAULT_NETWORK_KEY = 'sandbox-card-network-development-key';

function mac(key: string, payload: string): string {
  return createHmac('sha256', key).update(payload).digest('hex').slice(0, 32);
}

/**
 * The network's id of a new authorization of `card` (a test payment method name); `last4`: the
 * last four digits of the number it was charged with, when that is not the sandbox's own test
 * card's (payment-methods.ts testCard).
 */
export function issueNetworkTransactionId(key: string, card: string, last4?: string): string {
  const payload = Buffer.from(JSON.stringify({ card, nonce: randomBytes(8).toString('hex'), ...(last4 === undefined ? {} : { last4 }) })).toString('base64url');
  return `ntx_${payload}.${mac(key, payload)}`;
}

/** The test card a network transaction id was issued for, or null when the network never issued it. */
export function cardOfNetworkTransactionId(key: string, id: string): string | null {
  return networkCardOf(key, id)?.card ?? null;
}

/**
 * The card's fingerprint, as the network and the sandbox's charges know it (a charge's
 * `card.fingerprint`, as card PSPs name it): one per card number, however often the card is saved or
 * charged, at any sandbox. A test card (a test payment method name, a variant included:
 * payment-methods.ts) is one card; one a PSP off the sandboxes charged with a number of its own
 * (`last4`: a PSP double's, doubles/<kind>/network.ts) is another.
 */
export function cardFingerprint(card: string, last4: string | null = null): string {
  return createHash('sha256').update(last4 === null ? `card:${card}` : `card:${card}:${last4}`).digest('hex').slice(0, 24);
}

/**
 * The test card and the card account a network transaction id stands for (the account: the
 * card's fingerprint, so every saved copy of one card is one account the network counts the
 * attempts of, as the card networks count per card), and the last four digits of the number it
 * was issued for when the id carries them; null when the network never issued it.
 */
export function networkCardOf(key: string, id: string): { card: string; account: string; last4: string | null } | null {
  const match = /^ntx_([A-Za-z0-9_-]{1,400})\.([0-9a-f]{32})$/.exec(id);
  if (!match) return null;
  const [, payload, given] = match;
  const expected = mac(key, payload!);
  if (!timingSafeEqual(Buffer.from(expected), Buffer.from(given!))) return null;
  try {
    const decoded = JSON.parse(Buffer.from(payload!, 'base64url').toString('utf8')) as { card?: unknown; nonce?: unknown; last4?: unknown };
    if (typeof decoded.card !== 'string' || typeof decoded.nonce !== 'string') return null;
    const last4 = typeof decoded.last4 === 'string' ? decoded.last4 : null;
    return { card: decoded.card, account: cardFingerprint(decoded.card, last4), last4 };
  } catch {
    return null;
  }
}
