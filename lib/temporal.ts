import { Client, Connection, isGrpcServiceError } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import type { TemporalConnectionSettings } from './temporal-connection';

/**
 * `settings`: address, TLS, API key (lib/temporal-connection.ts); `dataConverter`:
 * lib/data-converter.ts, the one every client and worker of the service uses.
 */
export async function connectTemporal(settings: TemporalConnectionSettings, namespace: string, dataConverter: DataConverter): Promise<Client> {
  // Lazy: the API starts (and reports not-ready) while Temporal is still coming up.
  const connection = Connection.lazy(settings);
  return new Client({ connection, namespace, dataConverter });
}

/**
 * gRPC status codes that mean "the engine did not answer": CANCELLED (the channel went away
 * under the call), DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED (the frontend's rate limits, or a
 * node shedding load), UNAVAILABLE (refused, reset, node down, shutting down).
 */
const unavailableCodes = new Set([1, 4, 8, 14]);
/**
 * UNKNOWN and INTERNAL are the server's own failures, except when grpc-js reports a broken
 * HTTP/2 stream or a proxy's HTTP error page with them.
 */
const AMBIGUOUS = new Set([2, 13]);
const brokenTransport = /RST_STREAM|GOAWAY|Connection dropped|connection (?:closed|reset)|Stream refused|Protocol error|ECONNRESET|EPIPE|socket hang up|Received HTTP status code|Call ended without gRPC status/i;
/**
 * Errors raised without a gRPC status: the channel closed (`Channel has been shut down`, as
 * grpc-js throws once the connection was closed), the lazy connection's first dial, sockets.
 */
const transportMessage = /Channel has been shut down|Failed to connect to Temporal|No connection established|Deadline exceeded|DEADLINE_EXCEEDED|UNAVAILABLE|RESOURCE_EXHAUSTED/;

/**
 * Why Temporal could not be reached, or null if `error` is something else (a refusal the
 * server answered, a bug). Walks the cause chain: the SDK wraps transport errors in a
 * ServiceError ("Unexpected error while making gRPC request") whose cause is the real one.
 */
export function temporalUnavailableReason(error: unknown): string | null {
  const seen = new Set<unknown>();
  for (let current = error; current && typeof current === 'object' && !seen.has(current); current = (current as { cause?: unknown }).cause) {
    seen.add(current);
    const message = String((current as Error).message ?? '');
    if (isGrpcServiceError(current)) {
      if (unavailableCodes.has(current.code)) return `gRPC ${current.code}: ${current.details || message}`;
      if (AMBIGUOUS.has(current.code) && brokenTransport.test(`${current.details} ${message}`)) return `gRPC ${current.code}: ${current.details || message}`;
      // Any other status is the server's answer: the engine was reached.
      return null;
    }
    if (transportMessage.test(message)) return message;
  }
  return null;
}

/**
 * Temporal could not be reached or did not answer in time: the operation did not run (or
 * its start is unknown) and the API fails closed with 503 temporal_unavailable.
 */
export function isTemporalUnavailable(error: unknown): boolean {
  return temporalUnavailableReason(error) !== null;
}
