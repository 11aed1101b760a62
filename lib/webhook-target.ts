/**
 * Where webhooks may be sent. A webhook URL is a request the merchant makes us send from
 * inside our network: without these checks it reaches the cloud metadata service
 * (169.254.169.254), the worker's own /metrics, a database port on 10.x… (SSRF).
 *
 * The check runs on the URL when it is set (PATCH /admin/tenants/{id}) and again on the
 * address actually dialled at each delivery (the `lookup` of the connection), so a DNS name
 * that resolved to a public address at PATCH time and to an internal one later (DNS
 * rebinding) is still refused.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/** The internal addresses a development or test stack lets webhooks reach: this machine only. */
export const LOOPBACK_CIDRS = '127.0.0.0/8,::1';

export interface WebhookTargetPolicy {
  /** Plain http is refused unless this is set (a development or test stack). */
  allowHttp: boolean;
  /** Internal addresses that are allowed anyway (WEBHOOK_ALLOWED_CIDRS). */
  allowed: BlockList;
  /** The same, as written, for messages. */
  allowedText: string;
}

/** Special-purpose ranges (IANA registries): never a merchant's public endpoint. */
const forbiddenRanges: [string, number, 'ipv4' | 'ipv6', string][] = [
  ['0.0.0.0', 8, 'ipv4', 'unspecified ("this network")'],
  ['10.0.0.0', 8, 'ipv4', 'private (RFC 1918)'],
  ['100.64.0.0', 10, 'ipv4', 'carrier-grade NAT (RFC 6598)'],
  ['127.0.0.0', 8, 'ipv4', 'loopback'],
  ['169.254.0.0', 16, 'ipv4', 'link-local (cloud metadata lives here)'],
  ['172.16.0.0', 12, 'ipv4', 'private (RFC 1918)'],
  ['192.0.0.0', 24, 'ipv4', 'IETF protocol assignments'],
  ['192.0.2.0', 24, 'ipv4', 'documentation'],
  ['192.88.99.0', 24, 'ipv4', '6to4 relay anycast'],
  ['192.168.0.0', 16, 'ipv4', 'private (RFC 1918)'],
  ['198.18.0.0', 15, 'ipv4', 'benchmarking'],
  ['198.51.100.0', 24, 'ipv4', 'documentation'],
  ['203.0.113.0', 24, 'ipv4', 'documentation'],
  ['224.0.0.0', 4, 'ipv4', 'multicast'],
  ['240.0.0.0', 4, 'ipv4', 'reserved (and broadcast)'],
  ['::', 128, 'ipv6', 'unspecified'],
  ['::1', 128, 'ipv6', 'loopback'],
  ['::ffff:0:0', 96, 'ipv6', 'IPv4-mapped'],
  ['::', 96, 'ipv6', 'IPv4-compatible'],
  ['64:ff9b::', 96, 'ipv6', 'NAT64 (embeds an IPv4 address)'],
  ['64:ff9b:1::', 48, 'ipv6', 'local NAT64'],
  ['100::', 64, 'ipv6', 'discard'],
  ['2001::', 23, 'ipv6', 'IETF protocol assignments (Teredo, ORCHID…)'],
  ['2001:db8::', 32, 'ipv6', 'documentation'],
  ['2002::', 16, 'ipv6', '6to4 (embeds an IPv4 address)'],
  ['fc00::', 7, 'ipv6', 'unique local (ULA)'],
  ['fe80::', 10, 'ipv6', 'link-local'],
  ['fec0::', 10, 'ipv6', 'site-local (deprecated)'],
  ['ff00::', 8, 'ipv6', 'multicast'],
];

// Why one list per range and the family filter: BlockList matches IPv4 addresses against
// IPv6 rules through their mapped form, so ::ffff:0:0/96 would otherwise catch every IPv4.
const forbidden = forbiddenRanges.map(([network, prefix, family, why]) => {
  const list = new BlockList();
  list.addSubnet(network, prefix, family);
  return { list, family, why: `${network}/${prefix} is ${why}` };
});

/** Parses WEBHOOK_ALLOWED_CIDRS: comma-separated CIDRs or single addresses ("127.0.0.0/8,::1"). */
export function webhookTargetPolicy(options: { allowedCidrs: string; allowHttp: boolean }): WebhookTargetPolicy {
  const allowed = new BlockList();
  for (const entry of options.allowedCidrs.split(',').map((s) => s.trim()).filter(Boolean)) {
    const [address, prefixText] = entry.split('/');
    const family = isIP(address ?? '');
    if (!family) throw new Error(`WEBHOOK_ALLOWED_CIDRS: "${entry}" is not an address or CIDR`);
    const prefix = prefixText === undefined ? (family === 4 ? 32 : 128) : Number(prefixText);
    if (!Number.isInteger(prefix) || prefix < 0 || prefix > (family === 4 ? 32 : 128)) throw new Error(`WEBHOOK_ALLOWED_CIDRS: bad prefix in "${entry}"`);
    allowed.addSubnet(address!, prefix, family === 4 ? 'ipv4' : 'ipv6');
  }
  return { allowHttp: options.allowHttp, allowed, allowedText: options.allowedCidrs };
}

/** Why this address may not be dialled, or null if it may. */
export function refusedAddress(address: string, policy: WebhookTargetPolicy): string | null {
  const family = isIP(address);
  if (!family) return `${address} is not an IP address`;
  const type = family === 4 ? 'ipv4' : 'ipv6';
  if (policy.allowed.check(address, type)) return null;
  const hit = forbidden.find((range) => range.family === type && range.list.check(address, type));
  return hit ? `${address}: ${hit.why}; allow it explicitly with WEBHOOK_ALLOWED_CIDRS` : null;
}

export type UrlVerdict = { ok: true; url: URL } | { ok: false; reason: string };

/** The URL's own rules: scheme, no credentials, no characters the parser would silently drop. */
export function checkWebhookUrlSyntax(raw: string, policy: WebhookTargetPolicy): UrlVerdict {
  // The URL parser drops tabs and newlines and trims controls: what we check must be what was sent.
  if (/[\u0000-\u0020\u007f]/.test(raw)) return { ok: false, reason: 'must not contain spaces or control characters' };
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: 'is not a valid URL' };
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && policy.allowHttp)) {
    return { ok: false, reason: policy.allowHttp ? 'must be an http or https URL' : 'must be an https URL (plain http is not allowed here)' };
  }
  if (url.username || url.password) return { ok: false, reason: 'must not carry credentials (user:password@)' };
  if (!url.hostname) return { ok: false, reason: 'has no host' };
  return { ok: true, url };
}

/** The hostname as an address if it is an IP literal (the URL parser already turned decimal, octal and hex IPv4 into dotted form). */
function literalAddress(url: URL): string | null {
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  return isIP(host) ? host : null;
}

/**
 * The whole check at configuration time: syntax, then every address the host resolves to.
 * A host that does not resolve is refused too: nothing could be delivered to it.
 */
export async function checkWebhookUrl(raw: string, policy: WebhookTargetPolicy, resolve = resolveAll): Promise<UrlVerdict> {
  const syntax = checkWebhookUrlSyntax(raw, policy);
  if (!syntax.ok) return syntax;
  const literal = literalAddress(syntax.url);
  let addresses: string[];
  try {
    addresses = literal ? [literal] : await resolve(syntax.url.hostname);
  } catch (error) {
    return { ok: false, reason: `host ${syntax.url.hostname} does not resolve (${(error as NodeJS.ErrnoException).code ?? 'error'})` };
  }
  if (addresses.length === 0) return { ok: false, reason: `host ${syntax.url.hostname} does not resolve` };
  for (const address of addresses) {
    const refused = refusedAddress(address, policy);
    if (refused) return { ok: false, reason: `resolves to a forbidden address: ${refused}` };
  }
  return syntax;
}

function resolveAll(hostname: string): Promise<string[]> {
  return new Promise((resolve, reject) =>
    dnsLookup(hostname, { all: true, verbatim: true }, (error, found: LookupAddress[]) => (error ? reject(error) : resolve(found.map((a) => a.address)))),
  );
}

/** A connection lookup that refuses to hand out any address the policy forbids. */
function guardedLookup(policy: WebhookTargetPolicy): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true, verbatim: true }, (error, found: LookupAddress[]) => {
      if (error) return callback(error, '', 4);
      const refused = found.map((a) => refusedAddress(a.address, policy)).find((reason) => reason !== null);
      if (refused) return callback(Object.assign(new Error(`webhook target refused: ${refused}`), { code: 'EWEBHOOKTARGET' }), '', 4);
      if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, found);
      callback(null, found[0]!.address, found[0]!.family);
    });
  };
}

/**
 * POSTs a webhook, checking the address that is dialled: a literal address before the
 * request, a name in the connection's own lookup (so the check and the connection use the
 * same resolution). Redirects are not followed. Answers the HTTP status.
 */
export async function postWebhook(
  raw: string,
  init: { headers: Record<string, string>; body: string; signal: AbortSignal },
  policy: WebhookTargetPolicy,
): Promise<{ status: number }> {
  const syntax = checkWebhookUrlSyntax(raw, policy);
  if (!syntax.ok) throw new Error(`webhook target refused: the URL ${syntax.reason}`);
  const literal = literalAddress(syntax.url);
  const refused = literal ? refusedAddress(literal, policy) : null;
  if (refused) throw new Error(`webhook target refused: ${refused}`);
  const send = syntax.url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const request = send(
      syntax.url,
      { method: 'POST', headers: { ...init.headers, 'content-length': String(Buffer.byteLength(init.body)) }, lookup: guardedLookup(policy), signal: init.signal },
      (response: IncomingMessage) => {
        response.resume(); // the body is not needed; drain it so the socket is released
        response.on('end', () => resolve({ status: response.statusCode ?? 0 }));
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    request.end(init.body);
  });
}
