import { Client, Connection, defaultGrpcRetryOptions, isGrpcServiceError, makeGrpcRetryInterceptor, type ConnectionOptions, type GrpcRetryOptions } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import type { TemporalConnectionSettings } from './temporal-connection';
import { tracingClientInterceptors } from './tracing';

/**
 * `settings`: address, TLS, API key (lib/temporal-connection.ts); `dataConverter`:
 * lib/data-converter.ts, the one every client and worker of the service uses.
 */
export async function connectTemporal(settings: TemporalConnectionSettings, namespace: string, dataConverter: DataConverter): Promise<Client> {
  // Lazy: the API starts (and reports not-ready) while Temporal is still coming up.
  const connection = TemporalConnection.lazy(settings);
  return new Client({ connection, namespace, dataConverter, interceptors: tracingClientInterceptors() });
}

/**
 * The longest close() waits for retries under way: the SDK's longest delay between two attempts
 * (5 s, plus 20% jitter) and the attempt it then starts. Past it, every retry scheduled before
 * the close began has started its attempt, and closing the channel ends that attempt.
 */
const CLOSE_WAIT_MS = 10_000;

/**
 * The SDK's retry policy for a connection's calls (its defaults: UNAVAILABLE, RESOURCE_EXHAUSTED
 * and the like, up to 10 attempts), which stops retrying once the connection closes and counts
 * the retries under way: scheduled on a timer, or their attempt running.
 */
class ClosingRetries {
  private readonly defaults = defaultGrpcRetryOptions();
  private closing = false;
  private underWay = 0;
  private allEnded: (() => void) | null = null;

  readonly options: GrpcRetryOptions = {
    retryableDecider: (attempt, status) => {
      // Attempt n >= 2 is the retry scheduled after attempt n - 1: it has ended.
      if (attempt >= 2 && --this.underWay === 0) this.allEnded?.();
      return !this.closing && this.defaults.retryableDecider(attempt, status);
    },
    // Called for each retry the decider allowed, which then waits this long on a timer.
    delayFunction: (attempt, status) => {
      this.underWay++;
      return this.defaults.delayFunction(attempt, status);
    },
  };

  /** No call retries from now on; resolves once the retries under way have ended (at most `boundMs`). */
  async stop(boundMs: number): Promise<void> {
    this.closing = true;
    if (this.underWay === 0) return;
    await new Promise<void>((resolve) => {
      const bound = setTimeout(resolve, boundMs);
      this.allEnded = () => {
        clearTimeout(bound);
        resolve();
      };
    });
  }
}

/**
 * A client connection to Temporal whose close() leaves no retry behind. The SDK retries a failed
 * call from a timer; a retry whose timer fires after the connection closed starts its call on
 * the closed channel, and grpc-js throws `Channel has been shut down` inside that timer, where
 * no caller can catch it: an uncaught exception that ends the process (the API at shutdown,
 * or the worker with a job's call still retrying, while Temporal is unreachable). Aborting a
 * call does not stop its scheduled retry. So close() first stops every retry and waits for
 * those under way to end (bounded: CLOSE_WAIT_MS), then closes the channel, which ends the
 * calls still running: each call's promise rejects with an error isTemporalUnavailable knows.
 * Every Temporal client of the product's processes uses it (NativeConnection, the worker's, is
 * not grpc-js).
 */
export class TemporalConnection extends Connection {
  private retries!: ClosingRetries;

  /** Dials on its first call. The retry policy is ClosingRetries': `options.interceptors` is replaced. */
  static override lazy(options: ConnectionOptions = {}): TemporalConnection {
    const retries = new ClosingRetries();
    const connection = super.lazy({ ...options, interceptors: [makeGrpcRetryInterceptor(retries.options)] }) as TemporalConnection;
    connection.retries = retries;
    return connection;
  }

  /** Dials now (Connection.connect, which builds the connection with lazy()). */
  static override async connect(options: ConnectionOptions = {}): Promise<TemporalConnection> {
    return (await super.connect(options)) as TemporalConnection;
  }

  override async close(): Promise<void> {
    await this.retries.stop(CLOSE_WAIT_MS);
    await super.close();
  }
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
