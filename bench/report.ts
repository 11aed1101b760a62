/** bench/results/latest.json (every figure) and latest.md (the summary a reviewer reads). */
import { statementsMarkdown, type StatementProfile } from './statements';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { formatRatio, round, roundRatio, type LatencySummary, type LoopResult, type RoundFigures } from './load';
import { enginesMarkdown, type EnginesResult } from './engines';
import type { RoundActivity } from './pgactivity';
import type { FailoverResult, FailoverWindow, RoutingResult } from './routing';
import type { StatementBuffers } from './scenarios';

export interface StormResult {
  keys: number;
  copies: number;
  latency: LatencySummary;
  /** Per key, the slowest of its copies; the median of that over keys. */
  slowestPerKeyP50: number;
  statuses: Record<string, number>;
  /** Tallies over keys: value → number of keys. */
  replayedPerKey: Record<string, number>;
  chargesPerPayment: Record<string, number>;
  ledgerTransactionsPerPayment: Record<string, number>;
  eventsPerPayment: Record<string, number>;
  distinctPaymentsPerKey: Record<string, number>;
  distinctBodiesPerKey: Record<string, number>;
}

/** One lane's figures in the history-size phase. */
export interface LaneFigures {
  rows: Record<string, number>;
  payments64: LoopResult;
  payments1: LoopResult;
  replay64: LoopResult;
  read64: LoopResult;
  storm: StormResult;
  /** EXPLAIN (ANALYZE, BUFFERS) of the hot statements on this lane's tables, per statement. */
  plans?: Record<string, StatementBuffers>;
}

/** One lane's uncounted warm-up run after seeding (64 clients), with PostgreSQL's activity meanwhile. */
export interface ScaleWarmup {
  throughput: number;
  p50: number;
  activity: RoundActivity;
}

/** The grown lane (factor × the base lane's history) measured interleaved with the base lane. */
export interface ScaleResult {
  factor: number;
  seedSeconds: number;
  /** BENCH_SCALE_VACUUM=1: both lanes vacuumed and a checkpoint taken after seeding. */
  vacuumed?: boolean;
  /** The same flag in results written before it was named `vacuumed` (BENCH_SCALE_SETTLE); read when re-rendered. */
  settled?: boolean;
  /** The uncounted warm-up runs after seeding, in order (grown lane first). */
  warmups?: ScaleWarmup[];
  base: LaneFigures;
  grown: LaneFigures;
}

/**
 * The figures compared across history sizes: name, which measurement, which figure of a
 * round, which way is better. The storm (one burst per key, not rounds) compares its p50.
 */
const scaleFigures: [string, (x: LaneFigures) => LoopResult | StormResult, (r: RoundFigures) => number, 'higher' | 'lower'][] = [
  ['new payments at 64 clients: throughput /s', (x) => x.payments64, (r) => r.throughput, 'higher'],
  ['new payments at 64 clients: p50 ms', (x) => x.payments64, (r) => r.p50, 'lower'],
  ['new payments at 1 client: p50 ms', (x) => x.payments1, (r) => r.p50, 'lower'],
  ['replays at 64 clients: throughput /s', (x) => x.replay64, (r) => r.throughput, 'higher'],
  ['replays at 64 clients: p99 ms', (x) => x.replay64, (r) => r.p99, 'lower'],
  ['one-read GET at 64 clients: throughput /s', (x) => x.read64, (r) => r.throughput, 'higher'],
  ['one-read GET at 64 clients: p99 ms', (x) => x.read64, (r) => r.p99, 'lower'],
  ['duplicate storm: p50 ms', (x) => x.storm, (r) => r.p50, 'lower'],
];

/** A storm's p50 as a one-round figure, so it compares like the rest. */
function asLoop(x: LoopResult | StormResult): LoopResult {
  if ('throughput' in x) return x;
  return { throughput: 0, latency: x.latency, completed: x.latency.count, failed: 0, windowMs: 0 };
}

/**
 * Change of the grown lane against the base lane, in %: the median of the per-round changes
 * (round r of the grown lane against round r of the base lane, measured back to back), with
 * their range; and whether the median is a degradation.
 */
function scaleChange(base: LoopResult | StormResult, grown: LoopResult | StormResult, pick: (r: RoundFigures) => number, better: 'higher' | 'lower') {
  const ratio = roundRatio(asLoop(grown), asLoop(base), pick);
  const pct = (x: number) => r2((x - 1) * 100);
  const change = pct(ratio.median);
  return { change, low: pct(ratio.min), high: pct(ratio.max), rounds: ratio.values.length, degraded: better === 'higher' ? -change : change };
}

const signed = (n: number) => `${n > 0 ? '+' : ''}${n}%`;
function changeText(c: ReturnType<typeof scaleChange>): string {
  return c.rounds > 1 ? `${signed(c.change)} (rounds ${signed(c.low)} … ${signed(c.high)})` : signed(c.change);
}

export interface BenchResults {
  startedAt: string;
  durationSeconds: number;
  machine: { cpus: number; cpuModel: string; memoryGb: number; node: string; loadBefore: number[]; loadAfter: number[]; topBefore: string[]; otherCores: number };
  settings: Record<string, unknown>;
  temporal: { store: 'file' | 'memory'; cli: string; description?: string };
  /** PostgreSQL's settings that decide whether checkpoints and autovacuum can land in a round. */
  postgres?: Record<string, string>;
  baseHistory: Record<string, number>;
  /** The empty workflow (start, complete): the engine's floor for any one-workflow-per-payment design. */
  empty: Record<number, LoopResult>;
  floor: Record<number, LoopResult>;
  payments: Record<number, LoopResult>;
  /** Absent when their phase was skipped (BENCH_SKIP). */
  replay?: LoopResult;
  read?: LoopResult;
  storm?: StormResult;
  /** Single-PSP vs routed payments, and the failover timeline. */
  routing?: RoutingResult;
  /** The cluster and the dev server side by side (bench/engines.ts). */
  engines?: EnginesResult;
  /** The product database's statements per payment over the new-payments phase (bench/statements.ts). */
  statements?: StatementProfile;
  scales: ScaleResult[];
  effects: {
    payments: number;
    charges: number;
    charged_payments: number;
    max_per_payment: number;
    ledger: number;
    /** Charges held by each PSP. */
    chargesAt?: Record<string, number>;
    succeeded_payments?: number;
    /** Over every succeeded payment: its succeeded (or authorized) charges summed over both PSPs → payments. */
    succeededChargesPerPayment?: Record<string, number>;
  };
  targets?: Target[];
}

export interface Target {
  name: string;
  goal: string;
  value: string;
  met: boolean;
}

const r2 = (n: number) => round(n, 2);

/**
 * The targets, evaluated on this run's side-by-side figures. Every ratio is the
 * median of per-round ratios (round r of one side against round r of the other).
 */
export function evaluateTargets(results: BenchResults): Target[] {
  const targets: Target[] = [];
  for (const [c, p] of Object.entries(results.payments)) {
    const f = results.floor[Number(c)]!;
    const ratio = roundRatio(p, f, (r) => r.throughput);
    targets.push({ name: `new-payment throughput at ${c} clients`, goal: '≥ 0.8 × floor', value: `${formatRatio(ratio)} × (${p.throughput} vs ${f.throughput}/s)`, met: ratio.median >= 0.8 });
  }
  const p1 = results.payments[1];
  const f1 = results.floor[1];
  if (p1 && f1) {
    const ratio = roundRatio(p1, f1, (r) => r.p50);
    targets.push({ name: 'new-payment p50 at 1 client', goal: '≤ 1.25 × floor p50', value: `${formatRatio(ratio)} × (${p1.latency.p50} vs ${f1.latency.p50} ms)`, met: ratio.median <= 1.25 });
  }
  if (results.replay && results.read) {
    const tr = roundRatio(results.replay, results.read, (r) => r.throughput);
    targets.push({ name: 'replay throughput at 64 clients', goal: '≥ 0.9 × one-read GET', value: `${formatRatio(tr)} × (${results.replay.throughput} vs ${results.read.throughput}/s)`, met: tr.median >= 0.9 });
    const pr = roundRatio(results.replay, results.read, (r) => r.p99);
    targets.push({ name: 'replay p99 at 64 clients', goal: '≤ 1.2 × one-read GET p99', value: `${formatRatio(pr)} × (${results.replay.latency.p99} vs ${results.read.latency.p99} ms)`, met: pr.median <= 1.2 });
  }
  if (results.storm) {
    const chargesOk = Object.keys(results.storm.chargesPerPayment).every((k) => k === '1');
    targets.push({ name: 'duplicate storm: charges per payment', goal: 'exactly 1', value: JSON.stringify(results.storm.chargesPerPayment), met: chargesOk });
  }
  const perPayment = results.effects.succeededChargesPerPayment;
  if (perPayment) {
    targets.push({
      name: 'whole run: succeeded charges per succeeded payment, over both PSPs',
      goal: 'exactly 1',
      value: JSON.stringify(perPayment),
      met: Object.keys(perPayment).every((k) => k === '1'),
    });
  }
  const top = results.scales.at(-1);
  if (top) {
    for (const [name, read, pick, better] of scaleFigures) {
      const change = scaleChange(read(top.base), read(top.grown), pick, better);
      targets.push({ name: `${top.factor}× history: ${name}`, goal: '≤ 10% worse than 1× (median of rounds)', value: changeText(change), met: change.degraded <= 10 });
    }
    const charges = { ...top.base.storm.chargesPerPayment };
    for (const [k, v] of Object.entries(top.grown.storm.chargesPerPayment)) charges[k] = (charges[k] ?? 0) + v;
    targets.push({ name: `${top.factor}× history: storm charges per payment`, goal: 'exactly 1', value: JSON.stringify(charges), met: Object.keys(charges).every((k) => k === '1') });
  }
  return targets;
}

export function writeReport(results: BenchResults, outDir: string): string[] {
  results.targets = evaluateTargets(results);
  mkdirSync(outDir, { recursive: true });
  const json = path.join(outDir, 'latest.json');
  const md = path.join(outDir, 'latest.md');
  writeFileSync(json, `${JSON.stringify(results, null, 2)}\n`);
  writeFileSync(md, markdown(results));
  return [json, md];
}

function markdown(results: BenchResults): string {
  const m = results.machine;
  const lines: string[] = [];
  lines.push('# Benchmark: the payment API against the engine\'s floor', '');
  lines.push(
    `Run ${results.startedAt}, ${results.durationSeconds} s. ${m.cpus}× ${m.cpuModel}, ${m.memoryGb} GB, Node ${m.node}. ` +
      `Load average before ${m.loadBefore.join(' / ')}, after ${m.loadAfter.join(' / ')} (1/5/15 min; the run itself keeps both cores busy); ` +
      `processes outside the stack used ${m.otherCores} cores on average during the run. ` +
      `${results.temporal.description ?? `Temporal dev server, ${results.temporal.store === 'file' ? 'SQLite file with WAL + synchronous=NORMAL, as `npm start` runs it' : 'in-memory SQLite'}`} (${results.temporal.cli.split('\n')[0]}), with devstack/temporal-cli.ts's dynamic config; Temporal payloads ${results.settings.payloadEncryption === false ? '**in clear** (BENCH_PAYLOAD_ENCRYPTION=off)' : 'encrypted by the payload codec (AES-256-GCM), as in production'}; a new payment's answer ${results.settings.paymentAnswer === 'update' ? 'by **Update-With-Start** (BENCH_PAYMENT_ANSWER=update)' : 'by its record\'s completion NOTIFY (PAYMENT_ANSWER=notify, the default)'}${results.settings.eagerStart ? '; **eager start** (BENCH_EAGER_START=on: the API process runs a payment worker and starts runs eagerly, API_EAGER_START=on)' : ''}. ` +
      'API, worker and two provider sandboxes (sandbox-a, the default PSP, and sandbox-b, each with its own database) as separate processes; PostgreSQL on 127.0.0.1:5432 (fresh databases, dropped at the end); ' +
      'the load generator and the Temporal client of the floor run in the bench process, on the same cores.',
    '',
  );
  lines.push(
    'Every figure below comes from this one run, and each pair that forms a ratio was measured interleaved (A, B, A, B…), ' +
      'so drift and background load hit both sides alike: **the ratios are the trustworthy numbers**; absolute figures move with the machine.',
    '',
  );
  lines.push('## Targets', '', '| target | goal | this run | met |', '|---|---|---|---|');
  for (const t of results.targets ?? []) lines.push(`| ${t.name} | ${t.goal} | ${t.value} | ${t.met ? 'yes' : '**no**'} |`);
  lines.push('');

  lines.push('## New payments vs the floor', '');
  lines.push(
    'Empty workflow: start and complete, no activity: the engine\'s floor for any design with one workflow per payment. ' +
      'Floor: a bare workflow with the automatic-capture payment\'s shape (local activity, regular activity, local activity, all no-ops, same options), ' +
      'on the same server, worker process and task queue, started and awaited with the Temporal client (`execute`). ' +
      'New payments: `POST /v1/payments` with a fresh key, `pm_card_visa`, closed loop; latency is the first response when it is final (201). ' +
      'When the stack is saturated the API\'s bounded wait can end first: the payment is answered 202 `processing` and the client, as the contract asks of it (docs/CONTRACT.md §3.1.6), ' +
      'polls `GET /v1/payments/{id}` (every 100 ms here) until it is final; that operation\'s latency runs to the final answer, and the count of those is shown.',
    '',
  );
  lines.push(
    'Ratios are medians of per-round ratios (each round of payments against the floor\'s and the empty workflow\'s round measured just before it), with the range over rounds in brackets.',
    '',
    '| clients | empty /s | empty p50 / p95 / p99 ms | floor /s | floor p50 / p95 / p99 ms | payments /s | payments p50 / p95 / p99 ms | throughput ratio to floor | p50 ratio to floor | throughput ratio to empty | answered 202 first | failed (empty / floor / payments) |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  );
  for (const [c, p] of Object.entries(results.payments)) {
    const f = results.floor[Number(c)]!;
    const e = results.empty?.[Number(c)];
    lines.push(
      `| ${c} | ${e?.throughput ?? '–'} | ${e ? lat(e.latency) : '–'} | ${f.throughput} | ${lat(f.latency)} | ${p.throughput} | ${lat(p.latency)} | ` +
        `${formatRatio(roundRatio(p, f, (r) => r.throughput))} | ${formatRatio(roundRatio(p, f, (r) => r.p50))} | ${e ? formatRatio(roundRatio(p, e, (r) => r.throughput)) : '–'} | ` +
        `${p.accepted202 ?? 0} | ${e?.failed ?? '–'} / ${f.failed} / ${p.failed} |`,
    );
  }
  const failures = [...Object.values(results.empty ?? {}), ...Object.values(results.floor), ...Object.values(results.payments), results.replay, results.read].filter(
    (r): r is LoopResult => Boolean(r?.firstFailure),
  );
  if (failures.length) lines.push('', `Failed operations (counted in the latency, not as successes), first: ${failures.map((f) => `\`${f.firstFailure}\``).join('; ')}`);
  lines.push('');

  const { replay, read } = results;
  if (replay && read) {
    lines.push('## Replays vs a one-read route (64 clients)', '');
    lines.push(
      'Replay: the same key and body as a finished payment (201, `Idempotent-Replayed: true`, byte-identical body checked). ' +
        'One-read route: `GET /v1/payments/{id}` (cached auth + one primary-key read) on the same API process.',
      '',
    );
    lines.push('| route | /s | p50 / p95 / p99 ms | max ms | failed |', '|---|---:|---:|---:|---:|');
    lines.push(`| replay | ${replay.throughput} | ${lat(replay.latency)} | ${replay.latency.max} | ${replay.failed} |`);
    lines.push(`| GET /v1/payments/{id} | ${read.throughput} | ${lat(read.latency)} | ${read.latency.max} | ${read.failed} |`);
    lines.push(
      `| ratio (median of ${replay.rounds?.length ?? 1} rounds, range) | ${formatRatio(roundRatio(replay, read, (r) => r.throughput))} | ` +
        `p99 ${formatRatio(roundRatio(replay, read, (r) => r.p99))} | | |`,
      '',
    );
  }
  if (results.routing) lines.push(...routingMarkdown(results.routing));
  if (results.engines) lines.push(...enginesMarkdown(results.engines));

  const cpuRows: [string, LoopResult | undefined][] = [
    ...Object.entries(results.empty ?? {}).map(([c, r]) => [`empty workflow, ${c} clients`, r] as [string, LoopResult]),
    ...Object.entries(results.floor).map(([c, r]) => [`floor, ${c} clients`, r] as [string, LoopResult]),
    ...Object.entries(results.payments).map(([c, r]) => [`new payment, ${c} clients`, r] as [string, LoopResult]),
    ['replay, 64 clients', results.replay],
    ['one-read GET, 64 clients', results.read],
    ...(results.routing?.comparisons ?? []).flatMap((c) => [
      [`single-PSP payment (routing phase), ${c.clients} clients`, c.single] as [string, LoopResult],
      [`routed payment 70/30 (routing phase), ${c.clients} clients`, c.routed] as [string, LoopResult],
    ]),
  ];
  const processes = ['temporal', 'worker', 'api', 'sandbox-a', 'sandbox-b', 'postgres', 'bench', 'total', 'other', 'pg_blocks_hit', 'pg_blocks_read'];
  if (cpuRows.some(([, r]) => r?.cpuPerOperation)) {
    lines.push('## Where the CPU goes', '');
    lines.push(
      'CPU time per operation by process (from /proc, over each whole run including its warm-up): `temporal` is the Temporal server (on a cluster, all its nodes), ' +
        '`sandbox-a` / `sandbox-b` the two provider sandboxes (sandbox-a the default PSP), `postgres` the backends ' +
        'serving the bench databases (the lane\'s and the two sandboxes\'), `bench` the load generator and the floor\'s Temporal client, `total` their sum; `other` is what the rest ' +
        'of the machine used meanwhile (another user\'s work, PostgreSQL\'s shared WAL writer and checkpointer), per operation too: near 0 means the ' +
        'figure was taken on a quiet machine. On 2 cores, throughput at high concurrency is bounded by the total. ' +
        '`pg_blocks_hit` / `pg_blocks_read`: PostgreSQL shared-buffer pages found in / read into its cache per operation, for the product\'s database alone (pg_stat_database; backends report about once a second, so short runs carry some slack).',
      '',
    );
    lines.push(`| operation | ${processes.join(' | ')} |`, `|---|${processes.map(() => '---:').join('|')}|`);
    for (const [label, r] of cpuRows) {
      if (r?.cpuPerOperation) lines.push(`| ${label} | ${processes.map((p) => r.cpuPerOperation![p] ?? '–').join(' | ')} |`);
    }
    lines.push('');
  }

  if (results.statements) lines.push(...statementsMarkdown(results.statements));

  const s = results.storm;
  if (s) lines.push(...stormMarkdown(s));

  if (results.scales.length) {
    lines.push('## Cost as the history grows', '');
    lines.push(
      `The main phases above run with ${results.settings.historyBase} finished payments in the tables at their start (the warm-up's plus synthetic ones: ${fmt(results.baseHistory)}). ` +
        'For this phase the bench starts a second lane: its own database, API and worker on the same Temporal server and sandboxes, and fills its tables with ' +
        'factor × the base lane\'s payments of synthetic finished history (INSERT … SELECT generate_series, triggers off; per payment one idempotency record with a ' +
        'real-sized stored response, one payment, one ledger transaction with its two entries and one outbox event; then VACUUM ANALYZE, a CHECKPOINT and the ' +
        'kernel\'s write-back flushed). Then both lanes are measured **interleaved**, each round alternating which lane goes first (base, grown; grown, base; …) after one uncounted run of each lane, so the comparison is side by side like every ' +
        'other ratio here. (Measured one after the other, as a first version of this bench did, the drift between phases alone moved every process\'s CPU per ' +
        'operation by up to ±25%, the floor\'s too, which touches no table.)',
      '',
    );
    for (const scale of results.scales) {
      const b = scale.base.rows;
      const g = scale.grown.rows;
      lines.push(
        `### ${scale.factor}× (seeded in ${scale.seedSeconds} s)`,
        '',
        `Rows (payments / idempotency records / ledger entries / outbox events): base lane ${b.payments} / ${b.idempotency_records} / ${b.ledger_entries} / ${b.outbox_events}; ` +
          `grown lane ${g.payments} / ${g.idempotency_records} / ${g.ledger_entries} / ${g.outbox_events}.`,
        '',
        '| figure | base lane | grown lane | change (median of per-round changes; range) |',
        '|---|---:|---:|---:|',
      );
      for (const [name, read, pick, better] of scaleFigures) {
        const change = scaleChange(read(scale.base), read(scale.grown), pick, better);
        const whole = (x: LaneFigures) => {
          const r = asLoop(read(x));
          return r2(pick({ throughput: r.throughput, p50: r.latency.p50, p99: r.latency.p99 }));
        };
        lines.push(`| ${name} | ${whole(scale.base)} | ${whole(scale.grown)} | ${changeText(change)}${change.degraded > 10 ? ' **(worse > 10%)**' : ''} |`);
      }
      lines.push(`| storm: charges per payment | ${fmt(scale.base.storm.chargesPerPayment)} | ${fmt(scale.grown.storm.chargesPerPayment)} | |`, '');
      lines.push(...roundsMarkdown(scale, results.postgres));
      const perOp = (name: string, r: LoopResult) =>
        `| ${name} | ${['worker', 'api', 'postgres', 'temporal', 'total'].map((p) => r.cpuPerOperation?.[p] ?? '–').join(' | ')} | ${r.cpuPerOperation?.pg_blocks_hit ?? '–'} | ${r.cpuPerOperation?.pg_blocks_read ?? '–'} |`;
      lines.push(
        'CPU ms and PostgreSQL shared-buffer pages per operation, by lane:',
        '',
        '| operation, lane | worker | api | postgres | temporal | total | pg pages hit | pg pages read |',
        '|---|---:|---:|---:|---:|---:|---:|---:|',
      );
      for (const [label, key] of [['new payment 64', 'payments64'], ['new payment 1', 'payments1'], ['replay 64', 'replay64'], ['GET 64', 'read64']] as const) {
        lines.push(perOp(`${label}, base`, scale.base[key]), perOp(`${label}, ${scale.factor}×`, scale.grown[key]));
      }
      lines.push('');
      if (scale.base.plans && scale.grown.plans) {
        lines.push(
          'Hot statements under EXPLAIN (ANALYZE, BUFFERS), writes rolled back, 20 samples each: shared-buffer pages hit / read and execution ms per statement.',
          '',
          '| statement | base: hit / read / ms | grown: hit / read / ms |',
          '|---|---:|---:|',
        );
        for (const [name, b] of Object.entries(scale.base.plans)) {
          const g = scale.grown.plans[name];
          lines.push(`| ${name} | ${b.hit} / ${b.read} / ${b.ms} | ${g ? `${g.hit} / ${g.read} / ${g.ms}` : '–'} |`);
        }
        lines.push('');
      }
    }
  }

  const e = results.effects;
  lines.push('## Effects over the whole run', '');
  lines.push(
    `${e.payments} payments created through the API; ${e.charges} charges at the providers${e.chargesAt ? ` (${fmt(e.chargesAt)})` : ''} for ${e.charged_payments} distinct payments ` +
      `(at most ${e.max_per_payment} per payment); ${e.ledger} ledger transactions.` +
      (e.succeededChargesPerPayment
        ? ` Succeeded charges (or authorizations) per succeeded payment, summed over both PSPs by the charge's reference (our payment id), ` +
          `over all ${e.succeeded_payments} succeeded payments, failovers included: ${fmt(e.succeededChargesPerPayment)} (value: payments; exactly once is \`1\` only).`
        : ''),
    '',
  );

  const notes = path.join(path.dirname(new URL(import.meta.url).pathname), 'NOTES.md');
  if (existsSync(notes)) lines.push(readFileSync(notes, 'utf8').trim(), '');
  return `${lines.join('\n')}\n`;
}

/** One run's PostgreSQL activity in a table cell. */
function activityCell(a: RoundActivity | undefined): string {
  if (!a) return '–';
  const mb = (bytes: number) => r2(bytes / 2 ** 20);
  const vacuums = [...Object.entries(a.autovacuums).map(([t, n]) => `vacuum ${t}${n > 1 ? ` ×${n}` : ''}`), ...Object.entries(a.autoanalyzes).map(([t, n]) => `analyze ${t}${n > 1 ? ` ×${n}` : ''}`)];
  const checkpoint = a.checkpointsTimed + a.checkpointsRequested;
  const lane = a.blocks[a.lane];
  return [
    checkpoint ? `**checkpoint completed: ${a.checkpointsTimed} timed / ${a.checkpointsRequested} req**` : 'no checkpoint completed',
    a.checkpointInProgressSamples ? `**checkpointer busy in ${a.checkpointInProgressSamples}/${a.samples} samples**` : '',
    `written ckpt/bg/backend ${a.buffersCheckpoint}/${a.buffersBgwriter}/${a.buffersBackend}`,
    `WAL ${mb(a.walBytes)} MB, ${a.walFullPageImages} FPI${a.operations ? ` (${r2(a.walBytes / 1024 / a.operations)} kB, ${r2(a.walFullPageImages / a.operations)} FPI per op)` : ''}`,
    a.autovacuumWorkerSamples ? `**autovacuum worker in ${a.autovacuumWorkerSamples}/${a.samples} samples**` : 'no autovacuum worker',
    ...(vacuums.length ? [`**${vacuums.join(', ')}**`] : []),
    lane ? `lane blocks read ${lane.read} / hit ${lane.hit}${a.operations ? ` (${r2(lane.read / a.operations)} / ${r2(lane.hit / a.operations)} per op)` : ''}, dead tuples ${lane.deadTuplesAfter}` : '',
  ]
    .filter(Boolean)
    .join('; ');
}

/** A run during which a checkpoint completed or was being written, or an autovacuum worker ran. */
const disturbed = (a: RoundActivity | undefined) =>
  Boolean(a && (a.checkpointsTimed || a.checkpointsRequested || a.checkpointInProgressSamples || a.buffersCheckpoint || a.autovacuumWorkerSamples || Object.keys(a.autovacuums).length));

/**
 * The per-round throughput changes (grown against base) split two ways, to read the verdict
 * off: by which lane went first, and by whether either run of the round was disturbed by a
 * checkpoint or an autovacuum worker.
 */
function roundSplits(b: LoopResult, g: LoopResult): string[] {
  const rounds = (b.rounds ?? []).map((br, i) => ({ change: r2(((g.rounds?.[i]?.throughput ?? NaN) / br.throughput - 1) * 100), ba: b.roundActivity?.[i], ga: g.roundActivity?.[i] }));
  const list = (xs: typeof rounds) => (xs.length ? xs.map((x) => signed(x.change)).join(', ') : 'none');
  const grownFirst = rounds.filter((x) => x.ga && x.ba && x.ga.position < x.ba.position);
  const baseFirst = rounds.filter((x) => x.ga && x.ba && x.ba.position < x.ga.position);
  const quiet = rounds.filter((x) => !disturbed(x.ba) && !disturbed(x.ga));
  return [
    `Throughput change per round, grown against base: with the base lane first ${list(baseFirst)}; with the grown lane first ${list(grownFirst)}. ` +
      `Rounds where neither run saw a checkpoint (completed, in progress or writing) or an autovacuum worker: ${list(quiet)}; the others: ${list(rounds.filter((x) => !quiet.includes(x)))}.`,
  ];
}

/**
 * Each round of the history-size phase, base and grown, with its order and what
 * PostgreSQL did during each run: a slow round can be matched to a checkpoint, an autovacuum
 * of either lane's tables, or more WAL or reads per operation.
 */
function roundsMarkdown(scale: ScaleResult, postgres: Record<string, string> | undefined): string[] {
  const lines: string[] = [`#### ${scale.factor}×: round by round, with PostgreSQL's activity during each run`, ''];
  lines.push(
    'Rounds alternate which lane goes first (round 1 base then grown, round 2 grown then base, …). ' +
      `${(scale.vacuumed ?? scale.settled) ? 'Before measuring, both lanes\' tables were vacuumed and analyzed and a checkpoint taken (BENCH_SCALE_VACUUM=1). ' : 'The grown lane\'s seeding ended with VACUUM ANALYZE of its tables and a CHECKPOINT; the base lane was not vacuumed (BENCH_SCALE_VACUUM unset). '}` +
      'Per run: checkpoints that completed during it (pg_stat_bgwriter; timed or requested) and the samples in which the checkpointer was in one (a spread checkpoint lasts minutes), 8 kB buffers written by the checkpointer / background writer / backends, ' +
      'WAL bytes and full-page images (checkpoints, buffers and WAL are the whole server\'s: only one lane is loaded at a time, but any other database on the server counts too), autovacuum workers seen running (pg_stat_activity every 250 ms) and autovacuum/autoanalyze runs ' +
      'that finished on either lane\'s tables (pg_stat_user_tables), and the measured lane database\'s shared-buffer reads / hits and dead tuples in its history tables at the end. ' +
      `Server: ${postgres ? Object.entries(postgres).map(([k, v]) => `${k} ${v}`).join(', ') : 'settings not recorded'}.`,
    '',
  );
  if (scale.warmups?.length) {
    lines.push('Uncounted warm-up runs after seeding (64 clients, 1 s + 3 s; grown lane first):', '');
    for (const w of scale.warmups) lines.push(`- ${w.activity.lane}: ${w.throughput}/s, p50 ${w.p50} ms; ${activityCell(w.activity)}`);
    lines.push('');
  }
  const groups: [string, keyof LaneFigures][] = [
    ['new payments at 64 clients', 'payments64'],
    ['new payments at 1 client', 'payments1'],
    ['replays at 64 clients', 'replay64'],
    ['one-read GET at 64 clients', 'read64'],
  ];
  for (const [name, key] of groups) {
    const b = scale.base[key] as LoopResult;
    const g = scale.grown[key] as LoopResult;
    if (!b.rounds || !g.rounds) continue;
    lines.push(
      `${name}:`,
      '',
      '| round | order | base /s, p50 / p99 ms | grown /s, p50 / p99 ms | grown vs base: /s, p50 | base run: PostgreSQL meanwhile | grown run: PostgreSQL meanwhile |',
      '|---:|---|---:|---:|---:|---|---|',
    );
    for (const [i, br] of b.rounds.entries()) {
      const gr = g.rounds[i];
      if (!gr) continue;
      const ba = b.roundActivity?.[i];
      const ga = g.roundActivity?.[i];
      const order = ba && ga ? (ba.position < ga.position ? 'base, grown' : 'grown, base') : '–';
      const pct = (x: number, y: number) => signed(r2((x / y - 1) * 100));
      lines.push(
        `| ${i + 1} | ${order} | ${br.throughput}, ${br.p50} / ${br.p99} | ${gr.throughput}, ${gr.p50} / ${gr.p99} | ${pct(gr.throughput, br.throughput)}, ${pct(gr.p50, br.p50)} | ${activityCell(ba)} | ${activityCell(ga)} |`,
      );
    }
    lines.push('', ...roundSplits(b, g), '');
  }
  return lines;
}

const lat = (l: LatencySummary) => `${l.p50} / ${l.p95} / ${l.p99}`;

function fmt(tally: Record<string, number>): string {
  return Object.entries(tally)
    .map(([k, v]) => `${k}: ${v}`)
    .join(', ');
}

function stormMarkdown(s: StormResult): string[] {
  const lines: string[] = ['## Duplicate storm', ''];
  lines.push(
    `${s.keys} keys, one after another, each sent ${s.copies} times at once (identical requests). ` +
      `Latency over all ${s.keys * s.copies} requests p50 / p95 / p99: ${lat(s.latency)} ms (max ${s.latency.max}); median over keys of the slowest copy: ${s.slowestPerKeyP50} ms.`,
    '',
  );
  lines.push('| per key | tally (value: keys) |', '|---|---|');
  lines.push(`| HTTP statuses (all requests) | ${fmt(s.statuses)} |`);
  lines.push(`| answers marked replayed | ${fmt(s.replayedPerKey)} |`);
  lines.push(`| distinct payments in the answers | ${fmt(s.distinctPaymentsPerKey)} |`);
  lines.push(`| distinct response bodies | ${fmt(s.distinctBodiesPerKey)} |`);
  lines.push(`| charges at the provider (sandbox-a, the default PSP) | ${fmt(s.chargesPerPayment)} |`);
  lines.push(`| ledger transactions | ${fmt(s.ledgerTransactionsPerPayment)} |`);
  lines.push(`| outbox events | ${fmt(s.eventsPerPayment)} |`, '');
  return lines;
}

/** The routing phase: routed vs single-PSP payments, side by side, and the failover timeline. */
function routingMarkdown(routing: RoutingResult): string[] {
  const lines: string[] = ['## Routing across two PSPs: routed vs single-PSP payments', ''];
  lines.push(
    'Two provider sandboxes run as separate processes with databases of their own (`PROVIDERS=sandbox-a=…,sandbox-b=…`). ' +
      'Single-PSP: a tenant without routing, whose payments go to the first configured PSP (sandbox-a). ' +
      `Routed: a tenant with \`${JSON.stringify(routing.routing)}\` (the split draws the first PSP per payment; the routed tenant's payments ended at ${fmt(routing.routedSplit)}). ` +
      'Both on the same API and worker, measured interleaved (single, routed, single, routed…); ratios are routed ÷ single, the median of per-round ratios with the range.',
    '',
    '| clients | single /s | single p50 / p95 / p99 ms | routed /s | routed p50 / p95 / p99 ms | throughput routed ÷ single | p50 routed ÷ single | p99 routed ÷ single | failed (single / routed) |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  );
  for (const c of routing.comparisons) {
    lines.push(
      `| ${c.clients} | ${c.single.throughput} | ${lat(c.single.latency)} | ${c.routed.throughput} | ${lat(c.routed.latency)} | ` +
        `${formatRatio(roundRatio(c.routed, c.single, (r) => r.throughput))} | ${formatRatio(roundRatio(c.routed, c.single, (r) => r.p50))} | ` +
        `${formatRatio(roundRatio(c.routed, c.single, (r) => r.p99))} | ${c.single.failed} / ${c.routed.failed} |`,
    );
  }
  lines.push('', 'CPU per operation of both, by process: "Where the CPU goes" below.', '');
  if (!routing.failover.length) return lines;

  const ms = (n: number | null | undefined) => (n === null || n === undefined ? 'not seen' : `${n} ms`);
  lines.push('## Failover: sandbox-a goes down under load', '');
  lines.push(
    `A tenant routed \`${JSON.stringify(routing.failoverRouting)}\` under a closed loop of ${routing.failover[0]!.clients} clients of new payments. ` +
      'At a recorded instant sandbox-a goes down: **unavailable** (`POST /_sandbox/outage {"mode":"unavailable"}`: creates answer 503 having done nothing, lookups answer; ' +
      'a payment moves on after two lookups by its key found no charge, §3.8) or **kill** (its process SIGKILLed: connections refused, the payment moves on at once; ' +
      'payments whose request was in flight at the kill have an unknown outcome and keep asking A until it is back). It stays down until the worker\'s circuit breaker ' +
      'has opened plus 4 s, then comes back (outage ended; process restarted). The breaker\'s state is read from the worker\'s `/metrics` ' +
      '(`provider_circuit_state{provider="sandbox-a"}`) every 100 ms; where each payment went, from its attempts (`payment_attempts`). ' +
      'Times in ms from the outage\'s start, and then from its end.',
    '',
    `| | ${routing.failover.map((f) => f.mode).join(' | ')} |`,
    `|---|${routing.failover.map(() => '---:').join('|')}|`,
  );
  const row = (label: string, pick: (f: FailoverResult) => string) => lines.push(`| ${label} | ${routing.failover.map(pick).join(' | ')} |`);
  row('before: successes at sandbox-a per second (what the breaker\'s window held)', (f) => `${f.successesAtAPerSecond}/s`);
  row('first payment answered as succeeded at sandbox-b', (f) => ms(f.firstSuccessAtBMs));
  row('breaker open (metrics)', (f) => ms(f.breakerOpenMs));
  row('first payment started with its first attempt at sandbox-b', (f) => ms(f.firstStraightToBMs));
  row('sandbox-a answers again (outage length)', (f) => `${ms(f.outageMs)}${f.restartMs !== undefined ? ` (restart ${f.restartMs} ms)` : ''}`);
  row('after the end: breaker half-open', (f) => ms(f.breakerHalfOpenAfterEndMs));
  row('after the end: breaker closed', (f) => ms(f.breakerClosedAfterEndMs));
  row('after the end: first payment back at sandbox-a (started / answered)', (f) => `${ms(f.backAtAStartedAfterEndMs)} / ${ms(f.backAtAAnsweredAfterEndMs)}`);
  lines.push('', 'Payments by window: before (started in the 3 s before the outage and answered before it), outage (answered after its start and started before its end, so those in flight at its start count here), ' +
      'recovery (started after its end, until the first payment back at sandbox-a). "first attempt at B": the breaker had put sandbox-a last; "moved A → B": attempt 1 at sandbox-a took no money, attempt 2 at sandbox-b.', '');
  lines.push('| mode, window | payments | failed | p50 / p95 / p99 ms | max ms | succeeded at | first attempt at B | moved A → B |', '|---|---:|---:|---:|---:|---|---:|---:|');
  for (const f of routing.failover) {
    for (const [name, w] of [['before', f.before], ['outage', f.outage], ['recovery', f.recovery]] as [string, FailoverWindow][]) {
      lines.push(`| ${f.mode}, ${name} | ${w.payments} | ${w.failed} | ${lat(w.latency)} | ${w.latency.max} | ${fmt(w.succeededAt)} | ${w.firstAttemptAtB} | ${w.movedToB} |`);
    }
  }
  lines.push('', `Breaker states seen (ms from the outage's start): ${routing.failover.map((f) => `${f.mode}: ${f.breakerStates.map((b) => `${b.state} at ${b.atMs}`).join(', ')}`).join('; ')}.`, '');
  return lines;
}
