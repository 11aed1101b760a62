import { describe, expect, it } from 'vitest';
import { checkWebhookUrl, LOOPBACK_CIDRS, refusedAddress, webhookTargetPolicy } from '../../lib/webhook-target';
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
