import { describe, expect, it } from 'vitest';
import { checkWebhookUrl, LOOPBACK_CIDRS, refusedAddress, specialPurposeBlocks, webhookTargetPolicy } from '../../lib/webhook-target';
import { assertSafeToListen, DEV_ADMIN_TOKEN, isStrongAdminToken, loadConfig } from '../../lib/config';

/**
 * Which webhook targets are refused, and why. Names resolve through a stub resolver here
 * (no traffic leaves the machine); the integration tests use the real resolver on loopback.
 */

const strict = webhookTargetPolicy({ allowedCidrs: '', allowHttp: false });
const resolvesTo = (addresses: string[]) => async () => addresses;

describe('addresses webhooks may not reach', () => {
  const refused = [
    '127.0.0.1', '127.255.255.254', '10.0.0.1', '172.16.0.1', '172.31.255.255', '192.168.1.1', '169.254.169.254', '169.254.0.1',
    '100.64.0.1', '100.127.255.255', '0.0.0.0', '224.0.0.1', '239.255.255.250', '255.255.255.255', '198.18.0.1',
    '::', '::1', 'fc00::1', 'fd00::1', 'fe80::1', 'ff02::1', '::ffff:169.254.169.254', '::ffff:127.0.0.1', '::ffff:10.0.0.1',
    '::127.0.0.1', '64:ff9b::a9fe:a9fe', '2002:a9fe:a9fe::1',
  ];
  for (const address of refused) {
    it(`refuses ${address}`, () => expect(refusedAddress(address, strict)).toMatch(/WEBHOOK_ALLOWED_CIDRS/));
  }
  for (const address of ['93.184.215.14', '8.8.8.8', '100.128.0.1', '172.32.0.1', '2606:4700::1111', '2a00:1450:4001::200e']) {
    it(`allows the public address ${address}`, () => expect(refusedAddress(address, strict)).toBeNull());
  }

  it('an allow-list lifts the refusal for its ranges only', () => {
    const loopback = webhookTargetPolicy({ allowedCidrs: LOOPBACK_CIDRS, allowHttp: true });
    expect(refusedAddress('127.0.0.1', loopback)).toBeNull();
    expect(refusedAddress('::1', loopback)).toBeNull();
    expect(refusedAddress('10.0.0.1', loopback)).toMatch(/RFC 1918/);
    expect(refusedAddress('169.254.169.254', loopback)).toMatch(/link-local/);
    const office = webhookTargetPolicy({ allowedCidrs: '10.1.0.0/16, fd12::/16', allowHttp: false });
    expect(refusedAddress('10.1.2.3', office)).toBeNull();
    expect(refusedAddress('10.2.0.1', office)).not.toBeNull();
    expect(refusedAddress('fd12::5', office)).toBeNull();
  });

  it('a malformed allow-list is refused at start-up', () => {
    expect(() => webhookTargetPolicy({ allowedCidrs: '10.0.0.0/33', allowHttp: false })).toThrow(/bad prefix/);
    expect(() => webhookTargetPolicy({ allowedCidrs: 'intranet', allowHttp: false })).toThrow(/not an address/);
  });
});

describe('webhook URLs', () => {
  const refusedUrls: [string, RegExp][] = [
    ['http://example.com/hook', /https/],
    ['ftp://example.com/hook', /https/],
    ['https://user:pass@example.com/hook', /credentials/],
    ['https://token@example.com/hook', /credentials/],
    ['https://169.254.169.254/latest/meta-data/', /link-local/],
    ['https://2852039166/', /link-local/], // 169.254.169.254 in decimal
    ['https://0xa9fea9fe/', /link-local/], // in hex
    ['https://0251.0376.0251.0376/', /link-local/], // in octal
    ['https://0x7f.1/', /loopback/], // 127.0.0.1, mixed
    ['https://127.1/', /loopback/],
    ['https://[::ffff:169.254.169.254]/', /IPv4-mapped/],
    ['https://[::ffff:a9fe:a9fe]/', /IPv4-mapped/],
    ['https://[fd00::1]/', /unique local/],
    ['https://[::1]:9464/metrics', /loopback/],
    ['https://10.0.0.5/', /RFC 1918/],
    ['https://100.64.1.1/', /carrier-grade/],
    ['https://[ff02::1]/', /multicast/],
    ['https://0.0.0.0/', /unspecified/],
    ['https://exa\tmple.com/', /control/],
    ['https://example.com/\u0000', /control/],
    ['not a url', /control|valid/],
  ];
  for (const [url, reason] of refusedUrls) {
    it(`refuses ${JSON.stringify(url)}`, async () => {
      const verdict = await checkWebhookUrl(url, strict, resolvesTo(['93.184.215.14']));
      expect(verdict.ok).toBe(false);
      if (!verdict.ok) expect(verdict.reason).toMatch(reason);
    });
  }

  it('a name is refused when any of its addresses is internal (one A record is enough to rebind)', async () => {
    const verdict = await checkWebhookUrl('https://hooks.example.com/x', strict, resolvesTo(['93.184.215.14', '10.0.0.7']));
    expect(verdict).toMatchObject({ ok: false, reason: expect.stringMatching(/10\.0\.0\.7/) });
  });

  it('a name that does not resolve is refused', async () => {
    const failing = async () => {
      throw Object.assign(new Error('nope'), { code: 'ENOTFOUND' });
    };
    expect(await checkWebhookUrl('https://nowhere.invalid/', strict, failing)).toMatchObject({ ok: false, reason: expect.stringMatching(/ENOTFOUND/) });
  });

  it('accepts https to public addresses, and http only where allowed', async () => {
    expect((await checkWebhookUrl('https://hooks.example.com/x', strict, resolvesTo(['93.184.215.14']))).ok).toBe(true);
    const http = webhookTargetPolicy({ allowedCidrs: LOOPBACK_CIDRS, allowHttp: true });
    expect((await checkWebhookUrl('http://127.0.0.1:8080/hook', http)).ok).toBe(true);
    expect((await checkWebhookUrl('http://localhost:8080/hook', http)).ok).toBe(true);
  });
});

describe('the admin token and the listening address', () => {
  it('production needs a long random admin token, never the development default', () => {
    // Payload encryption is off here: its own production rule is tested in payload-codec.test.ts.
    const production = { NODE_ENV: 'production', TEMPORAL_PAYLOAD_ENCRYPTION: 'off' };
    expect(() => loadConfig(production)).toThrow(/ADMIN_TOKEN/);
    expect(() => loadConfig({ ...production, ADMIN_TOKEN: DEV_ADMIN_TOKEN })).toThrow(/32\+ characters/);
    expect(() => loadConfig({ ...production, ADMIN_TOKEN: 'a'.repeat(40) })).toThrow(/ADMIN_TOKEN/);
    expect(() => loadConfig({ ...production, ADMIN_TOKEN: 'short-but-16-chars' })).toThrow(/ADMIN_TOKEN/);
    expect(loadConfig({ ...production, ADMIN_TOKEN: '3f9c1e0b7a5d4c2e8f6a1b3d5c7e9f0a' }).ADMIN_TOKEN).toHaveLength(32);
    expect(isStrongAdminToken(DEV_ADMIN_TOKEN)).toBe(false);
  });

  it('listens on 127.0.0.1 by default, and refuses another address with the development token', () => {
    const config = loadConfig({});
    expect(config.HOST).toBe('127.0.0.1');
    expect(() => assertSafeToListen(config)).not.toThrow();
    expect(() => assertSafeToListen({ ...config, HOST: '0.0.0.0' })).toThrow(/development ADMIN_TOKEN/);
    expect(() => assertSafeToListen({ HOST: '0.0.0.0', ADMIN_TOKEN: '3f9c1e0b7a5d4c2e8f6a1b3d5c7e9f0a' })).not.toThrow();
    expect(() => assertSafeToListen({ ...config, HOST: '::1' })).not.toThrow();
  });
});


/**
 * Every block of lib/webhook-target.ts's special-purpose table (the IANA
 * IPv4 and IPv6 Special-Purpose Address Registries and the non-global-unicast IPv6 space) is
 * refused at its first, middle and last address, in the spellings a URL can carry (IPv4 in
 * decimal, hex, octal and short forms, and embedded in IPv6), and the addresses just outside
 * each block are judged by the table too. Literal addresses are never resolved or dialled.
 * The arithmetic here is the test's own (bigint), independent of the BlockList the check uses.
 */

const neverResolve = async (): Promise<string[]> => {
  throw new Error('a literal address must not be resolved');
};

function v4ToBig(text: string): bigint {
  return text.split('.').reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n);
}
function bigToV4(value: bigint): string {
  return [24n, 16n, 8n, 0n].map((shift) => String((value >> shift) & 255n)).join('.');
}
function v6ToBig(text: string): bigint {
  let groups: string[];
  const tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  let body = text;
  const extra: string[] = [];
  if (tail) {
    const v4 = v4ToBig(tail[1]!);
    extra.push(((v4 >> 16n) & 0xffffn).toString(16), (v4 & 0xffffn).toString(16));
    body = text.slice(0, -tail[1]!.length).replace(/:$/, ':') || '::';
    if (body.endsWith(':') && !body.endsWith('::')) body = body.slice(0, -1);
  }
  const [head, rest] = body.split('::');
  const left = head ? head.split(':').filter(Boolean) : [];
  const right = [...(rest !== undefined && rest !== '' ? rest.split(':').filter(Boolean) : []), ...extra];
  if (rest === undefined) groups = [...left, ...extra];
  else groups = [...left, ...Array(8 - left.length - right.length).fill('0'), ...right];
  if (groups.length !== 8) throw new Error(`bad IPv6 in test: ${text}`);
  return groups.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g, 16)), 0n);
}
function bigToV6Full(value: bigint): string {
  return Array.from({ length: 8 }, (_, i) => ((value >> BigInt(16 * (7 - i))) & 0xffffn).toString(16).padStart(4, '0')).join(':');
}
/** The canonical (RFC 5952) spelling, as the URL parser writes it. */
const canonicalV6 = (value: bigint) => new URL(`http://[${bigToV6Full(value)}]/`).hostname.slice(1, -1);

interface Range { cidr: string; v6: boolean; start: bigint; end: bigint; prefix: number }
function range(cidr: string): Range {
  const [network, prefixText] = cidr.split('/');
  const v6 = network!.includes(':');
  const bits = v6 ? 128 : 32;
  const prefix = Number(prefixText);
  const size = 1n << BigInt(bits - prefix);
  const start = (v6 ? v6ToBig(network!) : v4ToBig(network!)) & ~(size - 1n) & ((1n << BigInt(bits)) - 1n);
  return { cidr, v6, start, end: start + size - 1n, prefix };
}
const ranges = specialPurposeBlocks.map((block) => range(block.cidr));
/** The most specific table block holding an address: the one the refusal must name. */
const mostSpecific = (v6: boolean, value: bigint) =>
  ranges.filter((r) => r.v6 === v6 && r.start <= value && value <= r.end).sort((a, b) => b.prefix - a.prefix)[0];

/** IPv4 in every spelling a URL host can carry, each with the block its refusal must name. */
function v4Spellings(value: bigint): [string, string | null][] {
  const [a, b, c, d] = bigToV4(value).split('.').map(Number) as [number, number, number, number];
  const hex = (n: number) => `0x${n.toString(16)}`;
  const oct = (n: number) => `0${n.toString(8)}`;
  const v4Block = mostSpecific(false, value)!.cidr;
  const h1 = ((a << 8) | b).toString(16);
  const h2 = ((c << 8) | d).toString(16);
  return [
    [bigToV4(value), v4Block],
    [String(value), v4Block], // one decimal number
    [`0x${value.toString(16)}`, v4Block], // one hex number
    [[a, b, c, d].map(oct).join('.'), v4Block], // octal parts
    [[a, b, c, d].map(hex).join('.'), v4Block], // hex parts
    [`${a}.${(b << 16) | (c << 8) | d}`, v4Block], // a.b24 (as 127.1)
    [`${a}.${b}.${(c << 8) | d}`, v4Block], // a.b.c16
    [`[::ffff:${bigToV4(value)}]`, '::ffff:0:0/96'], // IPv4-mapped
    [`[::ffff:${h1}:${h2}]`, '::ffff:0:0/96'],
    [`[0:0:0:0:0:FFFF:${h1.toUpperCase()}:${h2.toUpperCase()}]`, '::ffff:0:0/96'],
    [`[::ffff:0:${bigToV4(value)}]`, '::ffff:0:0:0/96'], // IPv4-translated (RFC 2765)
    [`[::ffff:0:${h1}:${h2}]`, '::ffff:0:0:0/96'],
    [`[64:ff9b::${bigToV4(value)}]`, '64:ff9b::/96'], // NAT64
    [`[64:ff9b:1::${h1}:${h2}]`, '64:ff9b:1::/48'], // local NAT64
    [`[2002:${h1}:${h2}::1]`, '2002::/16'], // 6to4
  ];
}

async function refusalOf(host: string): Promise<string | null> {
  const verdict = await checkWebhookUrl(`https://${host}/hook`, strict, neverResolve);
  return verdict.ok ? null : verdict.reason;
}

/** The block named in a refusal ("… 10.0.0.0/8 is private use (RFC 1918) …"). */
const namedBlock = (reason: string) => /\s(\S+\/\d+) is /.exec(reason)?.[1];

describe('the special-purpose table', () => {
  it('every entry names a well-formed block, a reason and an RFC', () => {
    for (const block of specialPurposeBlocks) {
      const r = range(block.cidr);
      expect(r.start, `${block.cidr} is not its own network address`).toBe(r.v6 ? v6ToBig(block.cidr.split('/')[0]!) : v4ToBig(block.cidr.split('/')[0]!));
      expect(block.name.length).toBeGreaterThan(3);
      expect(block.rfc).toMatch(/^RFC \d+$/);
    }
    // What the registries hold that the issue names: the table is the registry, not a list of tricks.
    for (const cidr of ['::ffff:0:0:0/96', '3fff::/20', '5f00::/16', '64:ff9b:1::/48', '192.88.99.0/24', '198.18.0.0/15', '100::/64']) {
      expect(specialPurposeBlocks.map((b) => b.cidr)).toContain(cidr);
    }
  });

  for (const block of specialPurposeBlocks) {
    const r = range(block.cidr);
    const points = [...new Set([r.start, r.start + (r.end - r.start) / 2n, r.end])];
    it(`refuses ${block.cidr} (${block.name}, ${block.rfc}) at its start, middle and end, in every spelling`, async () => {
      for (const value of points) {
        const spellings: [string, string | null][] = r.v6
          ? [
              [`[${canonicalV6(value)}]`, mostSpecific(true, value)!.cidr],
              [`[${bigToV6Full(value)}]`, mostSpecific(true, value)!.cidr],
              [`[${bigToV6Full(value).toUpperCase()}]`, mostSpecific(true, value)!.cidr],
            ]
          : v4Spellings(value);
        for (const [host, expected] of spellings) {
          const reason = await refusalOf(host);
          expect(reason, `${host} was allowed`).not.toBeNull();
          expect(namedBlock(reason!), `${host}: ${reason}`).toBe(expected);
        }
      }
    });
  }

  it('the address just outside each block is judged by the table, not by the block next door', async () => {
    for (const r of ranges) {
      const max = r.v6 ? (1n << 128n) - 1n : (1n << 32n) - 1n;
      for (const value of [r.start - 1n, r.end + 1n].filter((v) => v >= 0n && v <= max)) {
        const address = r.v6 ? canonicalV6(value) : bigToV4(value);
        const block = mostSpecific(r.v6, value);
        const reason = refusedAddress(address, strict);
        if (block) expect(reason && namedBlock(reason), `${address} (next to ${r.cidr})`).toBe(block.cidr);
        else expect(reason, `${address} (next to ${r.cidr}) is global unicast`).toBeNull();
      }
    }
  });

  it('IPv6 addresses in the IPv4-translated, reserved ::/8, documentation 3fff::/20 and SRv6 5f00::/16 blocks are refused', async () => {
    for (const host of ['[::ffff:0:10.0.0.1]', '[::ffff:0:a9fe:a9fe]', '[::1:0:0:1]', '[3fff::1]', '[5f00::1]']) {
      expect(await refusalOf(host), host).toMatch(/WEBHOOK_ALLOWED_CIDRS/);
    }
  });

  it('global unicast addresses outside every block are allowed', async () => {
    for (const address of ['8.8.8.8', '1.1.1.1', '93.184.215.14', '100.128.0.1', '172.32.0.1', '192.0.1.1', '223.255.255.254', '2606:4700::1111', '2a00:1450:4001::200e', '2001:4860:4860::8888', '3ffe::1', '2620:4f:8001::1']) {
      expect(mostSpecific(address.includes(':'), address.includes(':') ? v6ToBig(address) : v4ToBig(address)), address).toBeUndefined();
      expect(refusedAddress(address, strict), address).toBeNull();
    }
  });
});
