import canonicalize from 'canonicalize';
import { sha256Hex } from './ids';

/**
 * SHA-256 over the RFC 8785 canonical form of what defines the operation: the path
 * parameters and the validated body. Key order, whitespace and number spelling do not
 * change it; any change of meaning does. Transport noise (headers, the key itself) is
 * not part of it.
 */
export function requestFingerprint(params: Record<string, string>, body: unknown): string {
  const canonical = canonicalize({ params, body });
  if (canonical === undefined) throw new TypeError('request is not canonicalizable');
  return sha256Hex(canonical);
}
