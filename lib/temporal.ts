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

/** gRPC status codes: CANCELLED, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, UNAVAILABLE. */
const unavailableCodes = new Set([1, 4, 8, 14]);

/**
 * Temporal could not be reached or did not answer in time: the operation did not run (or
 * its start is unknown) and the API fails closed with 503.
 */
export function isTemporalUnavailable(error: unknown): boolean {
  if (isGrpcServiceError(error)) {
    return unavailableCodes.has(error.code);
  }
  const cause = (error as { cause?: unknown })?.cause;
  if (cause && cause !== error) return isTemporalUnavailable(cause);
  const message = String((error as Error)?.message ?? '');
  return /UNAVAILABLE|DEADLINE_EXCEEDED|Failed to connect|ECONNREFUSED|deadline/i.test(message);
}
