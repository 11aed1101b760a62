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

/** An address block that is not global unicast, with the RFC that sets it apart. */
export interface SpecialPurposeBlock {
  cidr: string;
  name: string;
  rfc: string;
}

/**
 * Every address block that is not global unicast, from the IANA IPv4 and IPv6 Special-Purpose
 * Address Registries (RFC 6890) and the IPv6 address space (only 2000::/3 is global unicast,
 * RFC 4291 §2.4), plus IPv4 multicast and the IPv6 space's other non-unicast parts. Each
 * entry names its block and the RFC that reserves it; the tests check the start, the middle
 * and the end of every block in several spellings, from this table. Blocks the registries
 * mark "globally reachable" (anycast services such as AS112, PCP or TURN) are refused as well: no
 * merchant's webhook endpoint lives there.
 */
export const specialPurposeBlocks: readonly SpecialPurposeBlock[] = [
  // IPv4 Special-Purpose Address Registry
  { cidr: '0.0.0.0/8', name: '"this network"', rfc: 'RFC 791' },
  { cidr: '0.0.0.0/32', name: 'unspecified ("this host on this network")', rfc: 'RFC 1122' },
  { cidr: '10.0.0.0/8', name: 'private use', rfc: 'RFC 1918' },
  { cidr: '100.64.0.0/10', name: 'shared address space (carrier-grade NAT)', rfc: 'RFC 6598' },
  { cidr: '127.0.0.0/8', name: 'loopback', rfc: 'RFC 1122' },
  { cidr: '169.254.0.0/16', name: 'link-local (cloud metadata lives here)', rfc: 'RFC 3927' },
  { cidr: '172.16.0.0/12', name: 'private use', rfc: 'RFC 1918' },
  { cidr: '192.0.0.0/24', name: 'IETF protocol assignments', rfc: 'RFC 6890' },
  { cidr: '192.0.0.0/29', name: 'IPv4 service continuity prefix', rfc: 'RFC 7335' },
  { cidr: '192.0.0.8/32', name: 'IPv4 dummy address', rfc: 'RFC 7600' },
  { cidr: '192.0.0.9/32', name: 'Port Control Protocol anycast', rfc: 'RFC 7723' },
  { cidr: '192.0.0.10/32', name: 'TURN anycast', rfc: 'RFC 8155' },
  { cidr: '192.0.0.170/31', name: 'NAT64/DNS64 discovery', rfc: 'RFC 8880' },
  { cidr: '192.0.2.0/24', name: 'documentation (TEST-NET-1)', rfc: 'RFC 5737' },
  { cidr: '192.31.196.0/24', name: 'AS112-v4', rfc: 'RFC 7535' },
  { cidr: '192.52.193.0/24', name: 'Automatic Multicast Tunneling', rfc: 'RFC 7450' },
  { cidr: '192.88.99.0/24', name: 'deprecated 6to4 relay anycast', rfc: 'RFC 7526' },
  { cidr: '192.168.0.0/16', name: 'private use', rfc: 'RFC 1918' },
  { cidr: '192.175.48.0/24', name: 'direct delegation AS112 service', rfc: 'RFC 7534' },
  { cidr: '198.18.0.0/15', name: 'benchmarking', rfc: 'RFC 2544' },
  { cidr: '198.51.100.0/24', name: 'documentation (TEST-NET-2)', rfc: 'RFC 5737' },
  { cidr: '203.0.113.0/24', name: 'documentation (TEST-NET-3)', rfc: 'RFC 5737' },
  { cidr: '240.0.0.0/4', name: 'reserved', rfc: 'RFC 1112' },
  { cidr: '255.255.255.255/32', name: 'limited broadcast', rfc: 'RFC 919' },
  // IPv4 multicast (not in the special-purpose registry: its own registry)
  { cidr: '224.0.0.0/4', name: 'multicast', rfc: 'RFC 5771' },

  // IPv6 Special-Purpose Address Registry
  { cidr: '::/128', name: 'unspecified', rfc: 'RFC 4291' },
  { cidr: '::1/128', name: 'loopback', rfc: 'RFC 4291' },
  { cidr: '::ffff:0:0/96', name: 'IPv4-mapped', rfc: 'RFC 4291' },
  { cidr: '64:ff9b::/96', name: 'IPv4/IPv6 translation (NAT64, embeds an IPv4 address)', rfc: 'RFC 6052' },
  { cidr: '64:ff9b:1::/48', name: 'IPv4/IPv6 translation, local use', rfc: 'RFC 8215' },
  { cidr: '100::/64', name: 'discard-only', rfc: 'RFC 6666' },
  { cidr: '100:0:0:1::/64', name: 'dummy IPv6 prefix', rfc: 'RFC 9780' },
  { cidr: '2001::/23', name: 'IETF protocol assignments', rfc: 'RFC 2928' },
  { cidr: '2001::/32', name: 'Teredo (embeds an IPv4 address)', rfc: 'RFC 4380' },
  { cidr: '2001:1::1/128', name: 'Port Control Protocol anycast', rfc: 'RFC 7723' },
  { cidr: '2001:1::2/128', name: 'TURN anycast', rfc: 'RFC 8155' },
  { cidr: '2001:1::3/128', name: 'DNS-SD service registration protocol anycast', rfc: 'RFC 9665' },
  { cidr: '2001:2::/48', name: 'benchmarking', rfc: 'RFC 5180' },
  { cidr: '2001:3::/32', name: 'Automatic Multicast Tunneling', rfc: 'RFC 7450' },
  { cidr: '2001:4:112::/48', name: 'AS112-v6', rfc: 'RFC 7535' },
  { cidr: '2001:10::/28', name: 'deprecated ORCHID', rfc: 'RFC 4843' },
  { cidr: '2001:20::/28', name: 'ORCHIDv2', rfc: 'RFC 7343' },
  { cidr: '2001:30::/28', name: 'drone remote ID entity tags', rfc: 'RFC 9374' },
  { cidr: '2001:db8::/32', name: 'documentation', rfc: 'RFC 3849' },
  { cidr: '2002::/16', name: '6to4 (embeds an IPv4 address)', rfc: 'RFC 3056' },
  { cidr: '2620:4f:8000::/48', name: 'direct delegation AS112 service', rfc: 'RFC 7534' },
  { cidr: '3fff::/20', name: 'documentation', rfc: 'RFC 9637' },
  { cidr: '5f00::/16', name: 'segment routing (SRv6) SIDs', rfc: 'RFC 9602' },
  { cidr: 'fc00::/7', name: 'unique local (ULA)', rfc: 'RFC 4193' },
  { cidr: 'fe80::/10', name: 'link-local', rfc: 'RFC 4291' },

  // The rest of the IPv6 address space that is not global unicast (IANA IPv6 Address Space; RFC 4291)
  { cidr: '::/96', name: 'IPv4-compatible (deprecated)', rfc: 'RFC 4291' },
  { cidr: '::ffff:0:0:0/96', name: 'IPv4-translated', rfc: 'RFC 2765' },
  { cidr: '::/8', name: 'reserved by the IETF (embeds IPv4 in several spellings)', rfc: 'RFC 4291' },
  { cidr: '::/3', name: 'outside global unicast 2000::/3', rfc: 'RFC 4291' },
  { cidr: '4000::/2', name: 'outside global unicast 2000::/3', rfc: 'RFC 4291' },
  { cidr: '8000::/1', name: 'outside global unicast 2000::/3', rfc: 'RFC 4291' },
  { cidr: 'fec0::/10', name: 'site-local (deprecated)', rfc: 'RFC 3879' },
  { cidr: 'ff00::/8', name: 'multicast', rfc: 'RFC 4291' },
];

// Why one list per block and the family filter: BlockList matches IPv4 addresses against
// IPv6 rules through their mapped form, so ::ffff:0:0/96 would otherwise catch every IPv4.
// Most specific first, so a refusal names the narrowest block (loopback, not "reserved").
const forbidden = specialPurposeBlocks
  .map((block) => {
    const [network, prefixText] = block.cidr.split('/') as [string, string];
    const family = isIP(network) === 4 ? ('ipv4' as const) : ('ipv6' as const);
    const list = new BlockList();
    list.addSubnet(network, Number(prefixText), family);
    return { list, family, prefix: Number(prefixText), why: `${block.cidr} is ${block.name} (${block.rfc})` };
  })
  .sort((a, b) => b.prefix - a.prefix);

/**
 * Comma-separated CIDRs or single addresses ("127.0.0.0/8,::1") as a BlockList; a malformed
 * entry throws, naming `setting` (WEBHOOK_ALLOWED_CIDRS, TRUSTED_PROXIES).
 */
export function cidrBlockList(text: string, setting: string): BlockList {
  const list = new BlockList();
  for (const entry of text.split(',').map((s) => s.trim()).filter(Boolean)) {
    const [address, prefixText] = entry.split('/');
    const family = isIP(address ?? '');
    if (!family) throw new Error(`${setting}: "${entry}" is not an address or CIDR`);
    const prefix = prefixText === undefined ? (family === 4 ? 32 : 128) : Number(prefixText);
    if (!Number.isInteger(prefix) || prefix < 0 || prefix > (family === 4 ? 32 : 128)) throw new Error(`${setting}: bad prefix in "${entry}"`);
    list.addSubnet(address!, prefix, family === 4 ? 'ipv4' : 'ipv6');
  }
  return list;
}

/** Parses WEBHOOK_ALLOWED_CIDRS. */
export function webhookTargetPolicy(options: { allowedCidrs: string; allowHttp: boolean }): WebhookTargetPolicy {
  return { allowHttp: options.allowHttp, allowed: cidrBlockList(options.allowedCidrs, 'WEBHOOK_ALLOWED_CIDRS'), allowedText: options.allowedCidrs };
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
 * A host that does not resolve is refused as well: nothing could be delivered to it.
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
