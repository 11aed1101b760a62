import { describe, expect, it } from 'vitest';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import { loadConfig } from '../../lib/config';
import { AesGcmPayloadCodec, generatePayloadKey, KEY_ID_METADATA, parsePayloadKeys } from '../../lib/payload-codec';

/** The payload codec alone: what it writes, what it refuses, how keys rotate. */

const keys = (text: string) => parsePayloadKeys(text);
const oldKey = generatePayloadKey('old');
const newKey = generatePayloadKey('new');
const secret = { payment_method: 'pm_card_visa', metadata: { canary: 'canary-7f3a' } };
const plain = (): Payload => defaultPayloadConverter.toPayload(secret);
const text = (payload: Payload) => Buffer.from(JSON.stringify({ m: payload.metadata && Object.values(payload.metadata).map((v) => Buffer.from(v).toString()), d: Buffer.from(payload.data ?? []).toString('latin1') }));

describe('AES-256-GCM payload codec', () => {
  it('encrypts the whole payload (metadata and data) under binary/encrypted with the key id, and decrypts it back', async () => {
    const codec = new AesGcmPayloadCodec(keys(oldKey));
    const [sealed] = await codec.encode([plain()]);
    expect(Buffer.from(sealed!.metadata!.encoding!).toString()).toBe('binary/encrypted');
    expect(Buffer.from(sealed!.metadata![KEY_ID_METADATA]!).toString()).toBe('old');
    expect(text(sealed!).toString()).not.toContain('canary-7f3a');
    expect(text(sealed!).toString()).not.toContain('json/plain');
    const [opened] = await codec.decode([sealed!]);
    expect(defaultPayloadConverter.fromPayload(opened!)).toEqual(secret);
  });

  it('uses a fresh nonce per payload: the same value never encrypts to the same bytes', async () => {
    const codec = new AesGcmPayloadCodec(keys(oldKey));
    const [a, b] = await codec.encode([plain(), plain()]);
    expect(Buffer.from(a!.data!).equals(Buffer.from(b!.data!))).toBe(false);
  });

  it('never hands out a nonce twice, across refills of its pool, and each sealed payload opens', async () => {
    const codec = new AesGcmPayloadCodec(keys(oldKey));
    const sealed = await codec.encode(Array.from({ length: 1500 }, plain));
    const nonces = new Set(sealed.map((p) => Buffer.from(p.data!).subarray(0, 12).toString('hex')));
    expect(nonces.size).toBe(1500);
    const opened = await codec.decode(sealed);
    expect(opened.map((p) => defaultPayloadConverter.fromPayload(p))).toEqual(Array.from({ length: 1500 }, () => secret));
  });

  it('passes through payloads it did not encrypt (written before encryption was switched on)', async () => {
    const codec = new AesGcmPayloadCodec(keys(oldKey));
    const [same] = await codec.decode([plain()]);
    expect(defaultPayloadConverter.fromPayload(same!)).toEqual(secret);
  });

  it('after a rotation ("new,old"): encrypts with the new key and still decrypts what the old key wrote', async () => {
    const [written] = await new AesGcmPayloadCodec(keys(oldKey)).encode([plain()]);
    const rotated = new AesGcmPayloadCodec(keys(`${newKey},${oldKey}`));
    expect(defaultPayloadConverter.fromPayload((await rotated.decode([written!]))[0]!)).toEqual(secret);
    const [rewritten] = await rotated.encode([plain()]);
    expect(Buffer.from(rewritten!.metadata![KEY_ID_METADATA]!).toString()).toBe('new');
  });

  it('refuses a payload under a key it does not hold, a tampered ciphertext, and a relabelled key id', async () => {
    const [written] = await new AesGcmPayloadCodec(keys(oldKey)).encode([plain()]);
    await expect(new AesGcmPayloadCodec(keys(newKey)).decode([written!])).rejects.toThrow(/key "old".*not among the configured keys \(new\)/);
    const tampered = { ...written!, data: Buffer.from(written!.data!).map((b, i) => (i === 20 ? b ^ 1 : b)) };
    await expect(new AesGcmPayloadCodec(keys(oldKey)).decode([tampered])).rejects.toThrow();
    // The same key material under another id: the id is authenticated, so this fails too.
    const relabelled = keys(oldKey.replace(/^old:/, 'other:'));
    const moved = { ...written!, metadata: { ...written!.metadata, [KEY_ID_METADATA]: Buffer.from('other') } };
    await expect(new AesGcmPayloadCodec(relabelled).decode([moved])).rejects.toThrow();
  });
});

describe('TEMPORAL_PAYLOAD_KEYS', () => {
  it('parses id:base64 pairs, newest first, and refuses malformed ones without echoing key material', () => {
    expect(keys(` ${newKey} , ${oldKey}`).map((k) => k.id)).toEqual(['new', 'old']);
    const short = `short:${Buffer.alloc(16).toString('base64')}`;
    expect(() => keys(short)).toThrow(/key short: expected 32 bytes/);
    expect(() => keys('no-colon')).toThrow(/entry 1: expected id:base64key/);
    expect(() => keys(`${oldKey},${oldKey}`)).toThrow(/unique/);
    try {
      keys(`bad id:${oldKey.split(':')[1]}`);
    } catch (error) {
      expect((error as Error).message).not.toContain(oldKey.split(':')[1]);
    }
  });

  it('is required in production unless encryption is explicitly off; optional elsewhere', () => {
    const production = { NODE_ENV: 'production', ADMIN_TOKEN: '3f9c1e0b7a5d4c2e8f6a1b3d5c7e9f0a' };
    expect(() => loadConfig(production)).toThrow(/TEMPORAL_PAYLOAD_KEYS is required in production/);
    expect(loadConfig({ ...production, TEMPORAL_PAYLOAD_ENCRYPTION: 'off' }).TEMPORAL_PAYLOAD_KEYS).toBeNull();
    expect(loadConfig({ ...production, TEMPORAL_PAYLOAD_KEYS: `${newKey},${oldKey}` }).TEMPORAL_PAYLOAD_KEYS!.map((k) => k.id)).toEqual(['new', 'old']);
    expect(() => loadConfig({ ...production, TEMPORAL_PAYLOAD_KEYS: 'x:abc' })).toThrow(/TEMPORAL_PAYLOAD_KEYS: key x/);
    expect(loadConfig({}).TEMPORAL_PAYLOAD_KEYS).toBeNull();
  });
});
