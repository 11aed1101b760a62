/**
 * Encryption of every Temporal payload this service writes: workflow and activity inputs and
 * results, update arguments, memo, failure messages and user metadata (summaries). The
 * Temporal server, its database, its backups and anyone reading them see ciphertext only;
 * the API, the worker and the codec server (lib/codec-server.ts) hold the keys.
 *
 * AES-256-GCM with a fresh random 96-bit nonce per payload. The whole encoded payload
 * (its metadata, e.g. `encoding: json/plain`, and its data) is serialized and encrypted, so
 * not even the payload's type shows. The result says `encoding: binary/encrypted` and names
 * the key it was encrypted with, so keys can be rotated: the first key encrypts, every
 * configured key decrypts, and a history written under a retired key still replays as long
 * as that key stays in the list.
 */
import { createCipheriv, createDecipheriv, randomBytes, randomFillSync } from 'node:crypto';
import { METADATA_ENCODING_KEY, type Payload, type PayloadCodec } from '@temporalio/common';
import protos from '@temporalio/proto';

// CommonJS: Node's ESM loader does not see its named exports.
const { temporal } = protos;

/** One AES-256 key and the id stored beside each payload it encrypted. */
export interface PayloadKey {
  id: string;
  /** 32 bytes. */
  key: Buffer;
}

export const ENCRYPTED_ENCODING = 'binary/encrypted';
export const KEY_ID_METADATA = 'encryption-key-id';

const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Fresh random nonces, taken from a buffer the CSPRNG refills once it is used up: one call
 * per 512 nonces instead of one per payload (a start encodes several). No byte is handed out
 * twice, so nonces stay as random, and as unique, as one randomBytes call each.
 */
class NoncePool {
  private readonly pool = Buffer.alloc(NONCE_BYTES * 512);
  private offset = this.pool.length;
  next(): Buffer {
    if (this.offset === this.pool.length) {
      randomFillSync(this.pool);
      this.offset = 0;
    }
    const nonce = Buffer.from(this.pool.subarray(this.offset, this.offset + NONCE_BYTES));
    this.offset += NONCE_BYTES;
    return nonce;
  }
}

export class PayloadKeyError extends Error {}

export class AesGcmPayloadCodec implements PayloadCodec {
  private readonly encryptingKey: PayloadKey;
  private readonly keysById: Map<string, Buffer>;
  private readonly nonces = new NoncePool();
  /** The encrypting key's id, as the AAD and as the payloads' metadata (the same bytes for every payload). */
  private readonly keyIdBytes: Buffer;
  private readonly encryptedEncoding = encoder.encode(ENCRYPTED_ENCODING);

  /** `keys[0]` encrypts; all of them decrypt. */
  constructor(keys: readonly PayloadKey[]) {
    if (keys.length === 0) throw new PayloadKeyError('at least one payload key is required');
    for (const { id, key } of keys) {
      if (key.length !== 32) throw new PayloadKeyError(`payload key ${id}: AES-256 needs 32 bytes, got ${key.length}`);
    }
    this.encryptingKey = keys[0]!;
    this.keyIdBytes = Buffer.from(this.encryptingKey.id);
    this.keysById = new Map(keys.map(({ id, key }) => [id, key]));
    if (this.keysById.size !== keys.length) throw new PayloadKeyError('payload key ids must be unique');
  }

  async encode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((payload) => this.encrypt(payload));
  }

  async decode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((payload) => this.decrypt(payload));
  }

  encrypt(payload: Payload): Payload {
    const nonce = this.nonces.next();
    const cipher = createCipheriv('aes-256-gcm', this.encryptingKey.key, nonce);
    // The key id is authenticated too: a payload relabelled with another id fails to decrypt.
    cipher.setAAD(this.keyIdBytes);
    const plaintext = temporal.api.common.v1.Payload.encode(payload).finish();
    const sealed = Buffer.concat([nonce, cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
    return {
      metadata: { [METADATA_ENCODING_KEY]: this.encryptedEncoding, [KEY_ID_METADATA]: this.keyIdBytes },
      data: sealed,
    };
  }

  /** Payloads this codec did not encrypt (written before encryption was switched on) pass through. */
  decrypt(payload: Payload): Payload {
    const encoding = payload.metadata?.[METADATA_ENCODING_KEY];
    if (!encoding || decoder.decode(encoding) !== ENCRYPTED_ENCODING) return payload;
    const keyIdBytes = payload.metadata?.[KEY_ID_METADATA];
    if (!keyIdBytes) throw new PayloadKeyError(`an encrypted payload without its ${KEY_ID_METADATA}`);
    const keyId = decoder.decode(keyIdBytes);
    const key = this.keysById.get(keyId);
    if (!key) {
      throw new PayloadKeyError(`payload encrypted under key "${keyId}", which is not among the configured keys (${[...this.keysById.keys()].join(', ')})`);
    }
    const sealed = Buffer.from(payload.data ?? new Uint8Array());
    if (sealed.length < NONCE_BYTES + TAG_BYTES) throw new PayloadKeyError('an encrypted payload too short to hold its nonce and tag');
    const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(0, NONCE_BYTES));
    decipher.setAAD(Buffer.from(keyId));
    decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
    const plaintext = Buffer.concat([decipher.update(sealed.subarray(NONCE_BYTES, sealed.length - TAG_BYTES)), decipher.final()]);
    const { metadata, data } = temporal.api.common.v1.Payload.decode(plaintext);
    return { metadata, data };
  }
}

/**
 * `TEMPORAL_PAYLOAD_KEYS`: `id:base64key[,id:base64key…]`, newest first. Throws a message
 * fit for a configuration error; never echoes key material.
 */
export function parsePayloadKeys(text: string): PayloadKey[] {
  const keys = text
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean)
    .map((part, index) => {
      const colon = part.indexOf(':');
      const id = colon > 0 ? part.slice(0, colon) : '';
      if (!/^[A-Za-z0-9._-]{1,64}$/.test(id)) {
        throw new PayloadKeyError(`entry ${index + 1}: expected id:base64key with an id of letters, digits, dot, dash or underscore`);
      }
      const encoded = part.slice(colon + 1);
      const key = Buffer.from(encoded, 'base64');
      if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded) || key.length !== 32) {
        throw new PayloadKeyError(`key ${id}: expected 32 bytes in base64 (e.g. \`openssl rand -base64 32\`)`);
      }
      return { id, key };
    });
  if (keys.length === 0) throw new PayloadKeyError('no key given');
  if (new Set(keys.map((k) => k.id)).size !== keys.length) throw new PayloadKeyError('key ids must be unique');
  return keys;
}

/** A new random key in the `TEMPORAL_PAYLOAD_KEYS` form. */
export function generatePayloadKey(id: string): string {
  return `${id}:${randomBytes(32).toString('base64')}`;
}
