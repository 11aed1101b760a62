/**
 * A closed-loop load generator: N clients, each sending its next request as soon as the
 * previous one is answered, over keep-alive connections (node:http, which costs less CPU per
 * request than fetch: the generator shares the machine's cores with what it measures).
 */
import http from 'node:http';
import type { RoundActivity } from './pgactivity';

export interface HttpAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** One keep-alive HTTP client with at most `sockets` connections. */
export class HttpClient {
  private readonly agent: http.Agent;
  private readonly host: string;
  private readonly port: number;

  constructor(baseUrl: string, sockets: number) {
    const url = new URL(baseUrl);
    this.host = url.hostname;
    this.port = Number(url.port);
    this.agent = new http.Agent({ keepAlive: true, maxSockets: sockets, maxFreeSockets: sockets });
  }

  /** `headers` must carry content-type and content-length when `body` is given (callers precompute them). */
  request(method: string, path: string, headers: http.OutgoingHttpHeaders, body?: Buffer): Promise<HttpAnswer> {
    return new Promise((resolve, reject) => {
      const request = http.request(
        {
          host: this.host,
          port: this.port,
          method,
          path,
          agent: this.agent,
          headers,
        },
        (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks).toString('utf8') }));
          response.on('error', reject);
        },
      );
      request.on('error', reject);
      request.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

/** Latencies in ms, summarised. */
export interface LatencySummary {
  count: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
  mean: number;
}

export function summarise(latencies: number[]): LatencySummary {
  const sorted = Float64Array.from(latencies).sort();
  const at = (q: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]! : NaN);
  const sum = latencies.reduce((a, b) => a + b, 0);
  return {
    count: sorted.length,
    p50: round(at(0.5)),
    p95: round(at(0.95)),
    p99: round(at(0.99)),
    max: round(sorted.length ? sorted[sorted.length - 1]! : NaN),
    mean: round(sorted.length ? sum / sorted.length : NaN),
  };
}

export const round = (n: number, digits = 2) => Math.round(n * 10 ** digits) / 10 ** digits;

export interface LoopResult {
  /** Completed operations per second over the measured window. */
  throughput: number;
  latency: LatencySummary;
  /** Operations that completed in the window, and the ones among them that failed the check. */
  completed: number;
  failed: number;
  firstFailure?: string;
  windowMs: number;
  /** CPU ms per operation by process (Linux), when measured. */
  cpuPerOperation?: Record<string, number>;
  /** New payments first answered 202 (then followed to their final state), warm-up included. */
  accepted202?: number;
  /** Each interleaved round on its own, in order (ratios are taken round by round). */
  rounds?: RoundFigures[];
  /** History-size phase: what PostgreSQL did during each round (aligned with `rounds`), and this run's place in its round. */
  roundActivity?: RoundActivity[];
}

/** One round of an interleaved measurement. */
export interface RoundFigures {
  throughput: number;
  p50: number;
  p99: number;
}

/** A ratio taken per interleaved round: its median and spread. */
export interface RoundRatio {
  median: number;
  min: number;
  max: number;
  values: number[];
}

/**
 * a/b round by round (round r of A against round r of B, measured minutes apart at most
 * seconds), then the median: one disturbed round moves the median far less than it moves a
 * ratio of sums.
 */
export function roundRatio(a: LoopResult, b: LoopResult, pick: (r: RoundFigures) => number): RoundRatio {
  const ra = a.rounds ?? [{ throughput: a.throughput, p50: a.latency.p50, p99: a.latency.p99 }];
  const rb = b.rounds ?? [{ throughput: b.throughput, p50: b.latency.p50, p99: b.latency.p99 }];
  const values = ra.slice(0, rb.length).map((r, i) => round(pick(r) / pick(rb[i]!), 3));
  const sorted = [...values].sort((x, y) => x - y);
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  return { median: round(median, 2), min: round(sorted[0]!, 2), max: round(sorted.at(-1)!, 2), values };
}

/** "0.81 (0.78–0.84)": a per-round median with its range. */
export function formatRatio(r: RoundRatio): string {
  return r.values.length > 1 ? `${r.median} (${r.min}–${r.max})` : `${r.median}`;
}

/** A run's figures and its raw latencies (to merge interleaved runs into one distribution). */
export interface LoopRun {
  result: LoopResult;
  samples: number[];
  /** Every operation that completed, warm-up and drain included (for CPU per operation). */
  operations: number;
  /** CPU ms by process over the whole run (filled in by the caller). */
  cpuMs?: Record<string, number>;
  accepted202?: number;
}

export interface LoopOptions {
  concurrency: number;
  /** Operations completing in the first `warmupMs` are not counted. */
  warmupMs: number;
  durationMs: number;
  /** One operation; throws (or returns a string) to mark it failed. */
  operation: (client: number) => Promise<string | void>;
  /** Called about every 250 ms with the count so far (progress display). */
  onProgress?: (done: number, elapsedMs: number) => void;
}

/**
 * Runs `concurrency` clients for warm-up + duration. Only operations that complete within
 * the measured window count; those still in flight at its end are awaited, not counted.
 */
export async function closedLoop(options: LoopOptions): Promise<LoopRun> {
  const start = performance.now();
  const windowStart = start + options.warmupMs;
  const windowEnd = windowStart + options.durationMs;
  const latencies: number[] = [];
  let failed = 0;
  let firstFailure: string | undefined;
  let done = 0;
  const ticker = setInterval(() => options.onProgress?.(done, performance.now() - start), 250);
  const client = async (id: number) => {
    while (performance.now() < windowEnd) {
      const began = performance.now();
      let failure: string | void;
      try {
        failure = await options.operation(id);
      } catch (error) {
        failure = (error as Error)?.message ?? String(error);
      }
      const ended = performance.now();
      done++;
      if (ended < windowStart || ended > windowEnd) continue;
      if (failure) {
        failed++;
        firstFailure ??= failure;
      }
      latencies.push(ended - began);
    }
  };
  try {
    await Promise.all(Array.from({ length: options.concurrency }, (_, i) => client(i)));
  } finally {
    clearInterval(ticker);
  }
  return {
    result: {
      // Successes only; a failed operation's latency still counts (it was answered).
      throughput: round(((latencies.length - failed) / options.durationMs) * 1000, 1),
      latency: summarise(latencies),
      completed: latencies.length,
      failed,
      ...(firstFailure ? { firstFailure } : {}),
      windowMs: options.durationMs,
    },
    samples: latencies,
    operations: done,
  };
}

/** Several runs of the same measurement (interleaved with others), merged into one figure. */
export function mergeRuns(loopRuns: LoopRun[]): LoopResult {
  const runs = loopRuns.map((r) => r.result);
  const latencies = loopRuns.flatMap((r) => r.samples);
  const windowMs = runs.reduce((a, r) => a + r.windowMs, 0);
  const completed = runs.reduce((a, r) => a + r.completed, 0);
  const failures = runs.filter((r) => r.firstFailure);
  const operations = loopRuns.reduce((a, r) => a + r.operations, 0);
  let cpuPerOperation: Record<string, number> | undefined;
  if (loopRuns.every((r) => r.cpuMs) && operations) {
    cpuPerOperation = {};
    for (const run of loopRuns) for (const [name, ms] of Object.entries(run.cpuMs!)) cpuPerOperation[name] = (cpuPerOperation[name] ?? 0) + ms;
    for (const name of Object.keys(cpuPerOperation)) cpuPerOperation[name] = round(cpuPerOperation[name]! / operations, 2);
  }
  const failed = runs.reduce((a, r) => a + r.failed, 0);
  const accepted202 = loopRuns.reduce((a, r) => a + (r.accepted202 ?? 0), 0);
  return {
    throughput: round(((completed - failed) / windowMs) * 1000, 1),
    latency: summarise(latencies),
    completed,
    failed,
    ...(failures.length ? { firstFailure: failures[0]!.firstFailure } : {}),
    windowMs,
    ...(cpuPerOperation ? { cpuPerOperation } : {}),
    ...(accepted202 ? { accepted202 } : {}),
    rounds: runs.map((r) => ({ throughput: r.throughput, p50: r.latency.p50, p99: r.latency.p99 })),
  };
}
