import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

/**
 * Operators' passwords, stored as scrypt hashes (node:crypto; RFC 7914):
 * `scrypt$<N>$<r>$<p>$<salt, base64>$<key, base64>`. The parameters travel with each hash, so
 * raising them later leaves every stored password readable.
 */

/** At least this many characters (docs/console.md). */
export const MIN_PASSWORD_LENGTH = 12;

/** N = 2^15, r = 8: 32 MiB and some tens of milliseconds per check, OWASP's scrypt floor. */
const PARAMETERS = { N: 2 ** 15, r: 8, p: 1 } as const;
const KEY_BYTES = 32;
/** scrypt needs 128·N·r bytes; Node's default ceiling (32 MiB) is exactly that, so it is raised a little. */
const maxmem = (N: number, r: number) => 128 * N * r + 1024 * 1024;

function derive(password: string, salt: Buffer, options: ScryptOptions & { N: number; r: number }): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password.normalize('NFC'), salt, KEY_BYTES, { ...options, maxmem: maxmem(options.N, options.r) }, (error, key) => (error ? reject(error) : resolve(key))),
  );
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, PARAMETERS);
  return ['scrypt', PARAMETERS.N, PARAMETERS.r, PARAMETERS.p, salt.toString('base64'), key.toString('base64')].join('$');
}

/** Whether `password` is the one `stored` was made from; a malformed hash matches nothing. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, key] = stored.split('$');
  if (scheme !== 'scrypt' || !salt || !key) return false;
  const expected = Buffer.from(key, 'base64');
  const actual = await derive(password, Buffer.from(salt, 'base64'), { N: Number(n), r: Number(r), p: Number(p) });
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

/** Spent on a sign-in for an unknown email, so its answer takes as long as a wrong password's. */
let decoy: Promise<string> | null = null;
export async function verifyNothing(password: string): Promise<false> {
  decoy ??= hashPassword(randomBytes(16).toString('hex'));
  await verifyPassword(password, await decoy);
  return false;
}
