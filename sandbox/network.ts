import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * The simulated card network the sandboxes share, without a shared database: a network
 * transaction id names the test card it was issued for and carries an HMAC-SHA256 under the
 * network key (SANDBOX_NETWORK_KEY) every sandbox on the network is given. Any of them can then
 * tell which card an id stands for, and refuse one the network never issued, as a real scheme
 * recognises its own transaction ids.
 *
 * Form: `ntx_<base64url of {"card","nonce"}>.<32 hex of the HMAC>`.
 */
export const DEFAULT_NETWORK_KEY = 'sandbox-card-network-development-key';

function mac(key: string, payload: string): string {
  return createHmac('sha256', key).update(payload).digest('hex').slice(0, 32);
}

/** The network's id of a new authorization of `card` (a test payment method name). */
export function issueNetworkTransactionId(key: string, card: string): string {
  const payload = Buffer.from(JSON.stringify({ card, nonce: randomBytes(8).toString('hex') })).toString('base64url');
  return `ntx_${payload}.${mac(key, payload)}`;
}

/** The test card a network transaction id was issued for, or null when the network never issued it. */
export function cardOfNetworkTransactionId(key: string, id: string): string | null {
  return networkCardOf(key, id)?.card ?? null;
}

/**
 * The test card and the card account a network transaction id stands for (the account: the
 * nonce it was issued with, one per saved card, so two saved copies of one test card are two
 * accounts); null when the network never issued it.
 */
export function networkCardOf(key: string, id: string): { card: string; account: string } | null {
  const match = /^ntx_([A-Za-z0-9_-]{1,400})\.([0-9a-f]{32})$/.exec(id);
  if (!match) return null;
  const [, payload, given] = match;
  const expected = mac(key, payload!);
  if (!timingSafeEqual(Buffer.from(expected), Buffer.from(given!))) return null;
  try {
    const decoded = JSON.parse(Buffer.from(payload!, 'base64url').toString('utf8')) as { card?: unknown; nonce?: unknown };
    return typeof decoded.card === 'string' && typeof decoded.nonce === 'string' ? { card: decoded.card, account: decoded.nonce } : null;
  } catch {
    return null;
  }
}
