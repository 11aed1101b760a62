import type { History } from '@temporalio/common/lib/proto-utils';

/** One payload of a history that is NOT encrypted by the payload codec, and where it is. */
export interface ClearPayload {
  path: string;
  encoding: string;
  text: string;
}

/**
 * What may stay in clear in a history, and why: search attributes (the UI filters on them;
 * never a secret), the SDK core's own bookkeeping (patch markers, a local activity's
 * sequence number, type and times) and the request-id header (an id the API issued).
 */
export const ALLOWED_IN_CLEAR = [
  /\.searchAttributes\.indexedFields\.(TenantId|OrderId|PaymentStatus|TemporalChangeVersion)$/,
  /\.markerRecordedEventAttributes\.details\.patch-data\.payloads\[0\]$/,
  /\.markerRecordedEventAttributes\.details\.data\.payloads\[0\]$/,
  /\.header\.fields\.request-id$/,
];

/** Every payload of the history whose encoding is not `binary/encrypted`, with its path. */
export function clearPayloads(history: History): ClearPayload[] {
  const found: ClearPayload[] = [];
  const visit = (value: unknown, path: string): void => {
    if (!value || typeof value !== 'object' || ArrayBuffer.isView(value)) return;
    if (Array.isArray(value)) return value.forEach((child, i) => visit(child, `${path}[${i}]`));
    const metadata = (value as { metadata?: Record<string, unknown> }).metadata;
    const encoding = metadata?.encoding;
    if (encoding && ArrayBuffer.isView(encoding)) {
      const name = Buffer.from(encoding as Uint8Array).toString('utf8');
      if (name !== 'binary/encrypted') {
        found.push({ path, encoding: name, text: Buffer.from((value as { data?: Uint8Array }).data ?? []).toString('utf8') });
      }
      return;
    }
    for (const [key, child] of Object.entries(value)) visit(child, `${path}.${key}`);
  };
  (history.events ?? []).forEach((event, i) => visit(event, `events[${i}]`));
  return found;
}

/** The clear payloads that are not on the allowed list: each one a leak. */
export function leaks(history: History): ClearPayload[] {
  return clearPayloads(history).filter((p) => !ALLOWED_IN_CLEAR.some((allowed) => allowed.test(p.path)));
}
