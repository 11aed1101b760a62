/**
 * Summarises V8 CPU profiles (`node --cpu-prof`, e.g. the API's under `BENCH_PROFILE=api`) by
 * where the time goes: each sample is charged to the first frame, from the sampled function up
 * its stack, that belongs to a known part (validation, canonicalization, the payload codec, the
 * Temporal client, the PostgreSQL driver, logging, HTTP, the product's own code); samples with
 * no such frame are V8 and Node internals. Idle time is left out.
 *
 *   npx tsx bench/profile-summary.ts <dir with .cpuprofile files> [payments made while profiled]
 *
 * One table per profile file (Node writes one per thread: the main thread serves the requests;
 * a process run under tsx has its module loader in another, the bench's run compiled code).
 * With the payment count it also gives CPU ms per payment; a profile covers the whole process
 * life (start-up and every phase it served), so run the bench with only the payments phase.
 * The profiler's own sampling adds CPU: read the shares, and take absolute figures from an
 * unprofiled run.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** The parts, in the order a frame is tested against them; the first whose pattern matches wins. */
export const parts: { name: string; pattern: RegExp }[] = [
  { name: 'validation (zod, the OpenAPI schemas)', pattern: /node_modules\/(zod|@hono\/zod-openapi|@asteasolutions)\/|\/api\/schemas\.[tj]s/ },
  { name: 'canonicalization (fingerprint of the request)', pattern: /node_modules\/canonicalize\/|\/domain\/fingerprint\.[tj]s/ },
  { name: 'payload codec (encryption)', pattern: /\/lib\/(payload-codec|data-converter)\.[tj]s/ },
  { name: 'Temporal client (gRPC, protobuf)', pattern: /node_modules\/(@temporalio|@grpc|protobufjs|@protobufjs|long)\// },
  { name: 'PostgreSQL driver (postgres.js)', pattern: /node_modules\/postgres\// },
  { name: 'logging (pino)', pattern: /node_modules\/(pino|pino-std-serializers|sonic-boom|thread-stream|fast-redact|quick-format-unescaped|on-exit-leak-free|atomic-sleep)\/|\/lib\/logger\.[tj]s/ },
  { name: 'metrics (prom-client)', pattern: /node_modules\/prom-client\/|\/lib\/metrics\.[tj]s/ },
  { name: 'HTTP server and routing (hono, node:http)', pattern: /node_modules\/(hono|@hono\/node-server)\/|^node:_http_(server|incoming|outgoing|common)$/ },
  { name: 'the product\'s own code (api/, db/, domain/, lib/, shared/)', pattern: /\/(api|db|domain|lib|shared|provider)\/[^/]+\.[tj]s$|\/api\/routes\// },
  { name: 'module loading (start-up)', pattern: /node_modules\/(tsx|esbuild|get-tsconfig)\/|^node:internal\/modules/ },
];

const idle = new Set(['(idle)']);

export interface Summary {
  /** Non-idle CPU ms in the profiles. */
  busyMs: number;
  /** ms per part, the unmatched under 'V8 and Node internals (GC, native code)'. */
  byPart: Map<string, number>;
}

export function summarise(profiles: CpuProfile[]): Summary {
  const byPart = new Map<string, number>();
  let busyMs = 0;
  for (const profile of profiles) {
    const byId = new Map(profile.nodes.map((n) => [n.id, n]));
    const parent = new Map<number, number>();
    for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
    const partOf = new Map<number, string>();
    const classify = (id: number): string => {
      const known = partOf.get(id);
      if (known !== undefined) return known;
      const frame = byId.get(id)!.callFrame;
      const own = parts.find((p) => frame.url !== '' && p.pattern.test(frame.url))?.name;
      const up = parent.get(id);
      const part = own ?? (frame.functionName === '(garbage collector)' ? 'V8 and Node internals (GC, native code)' : up !== undefined ? classify(up) : 'V8 and Node internals (GC, native code)');
      partOf.set(id, part);
      return part;
    };
    profile.samples.forEach((id, i) => {
      if (idle.has(byId.get(id)!.callFrame.functionName)) return;
      const ms = (profile.timeDeltas[i] ?? 0) / 1000;
      busyMs += ms;
      const part = classify(id);
      byPart.set(part, (byPart.get(part) ?? 0) + ms);
    });
  }
  return { busyMs, byPart };
}

export const startUp = 'module loading (start-up)';

/** The parts after start-up (module loading left out), most first, with their share of that time. */
export function toMarkdown(summary: Summary, payments?: number): string {
  const served = summary.busyMs - (summary.byPart.get(startUp) ?? 0);
  const rows = [...summary.byPart.entries()].filter(([part]) => part !== startUp).sort((a, b) => b[1] - a[1]);
  const perPayment = payments !== undefined && payments > 0;
  const lines = [
    `| part | CPU ms | share |${perPayment ? ' ms per payment |' : ''}`,
    `|---|---:|---:|${perPayment ? '---:|' : ''}`,
    ...rows.map(([part, ms]) => `| ${part} | ${ms.toFixed(0)} | ${((100 * ms) / served).toFixed(1)}% |${perPayment ? ` ${(ms / payments).toFixed(2)} |` : ''}`),
    `| **all after start-up (idle left out)** | ${served.toFixed(0)} | 100% |${perPayment ? ` ${(served / payments).toFixed(2)} |` : ''}`,
    '',
    `Start-up (module loading, left out above): ${(summary.byPart.get(startUp) ?? 0).toFixed(0)} ms.`,
  ];
  return lines.join('\n');
}

if (process.argv[1] && import.meta.url.endsWith(path.basename(process.argv[1]))) {
  const [dir, payments] = process.argv.slice(2);
  if (!dir) throw new Error('usage: tsx bench/profile-summary.ts <dir of .cpuprofile files> [payments]');
  // One file per thread (under tsx its module loader has its own).
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.cpuprofile')).sort()) {
    const profile = JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as CpuProfile;
    console.log(`### ${file}\n\n${toMarkdown(summarise([profile]), payments === undefined ? undefined : Number(payments))}\n`);
  }
}
