/**
 * What the benchmark does to the stack: the floor workflow through the Temporal client,
 * new payments, replays and one-read GETs through the HTTP API, duplicate storms, and
 * synthetic history in the ledger and idempotency tables.
 */
import { execSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Sql } from '../db/connect';
import type { HttpClient } from './load';
import { historyTables, jsonHeaders } from './common';
import type { OutgoingHttpHeaders } from 'node:http';
import type { BenchStack } from './stack';

/** A finished payment the replay and read phases come back to. */
export interface FinishedPayment {
  key: string;
  body: Buffer;
  id: string;
  /** The first response's body: a replay must return these bytes. */
  response: string;
  /** The replay's headers, built once (the load generator shares the cores it measures). */
  headers: OutgoingHttpHeaders;
}

/** What the scenarios drive: one lane's API database, plus the shared Temporal client and sandbox. */
export type ScenarioTarget = Pick<BenchStack, 'temporal' | 'taskQueue' | 'sandboxUrl' | 'sql'>;

export class Scenarios {
  private readonly run = randomBytes(3).toString('hex');
  private counter = 0;
  /** Kept for the replay and read phases (a bounded, uniformly refreshed sample). */
  readonly finished: FinishedPayment[] = [];
  private readonly keep = 5000;

  /** The read's headers, built once. */
  private readonly readHeaders: OutgoingHttpHeaders;

  constructor(
    private readonly stack: ScenarioTarget,
    private readonly http: HttpClient,
    readonly tenant: { id: string; apiKey: string },
  ) {
    this.readHeaders = this.auth();
  }

  /** The lane's database (the bench's own client). */
  get sql(): Sql {
    return this.stack.sql;
  }

  private auth(): Record<string, string> {
    return { authorization: `Bearer ${this.tenant.apiKey}` };
  }


  /** The floor: start the no-op workflow and wait for its result, as a client would. */
  async floor(): Promise<string | void> {
    const n = ++this.counter;
    const id = `floor-${this.run}-${n}`;
    const result = await this.stack.temporal.workflow.execute('floorWorkflow', { taskQueue: this.stack.taskQueue, workflowId: id, args: [{ id }] });
    if (result !== id) return `floor workflow returned ${String(result)}`;
  }

  /** The empty workflow (start, complete): the engine's floor for one workflow per payment. */
  async empty(): Promise<string | void> {
    const n = ++this.counter;
    const id = `empty-${this.run}-${n}`;
    const result = await this.stack.temporal.workflow.execute('emptyWorkflow', { taskQueue: this.stack.taskQueue, workflowId: id, args: [{ id }] });
    if (result !== id) return `empty workflow returned ${String(result)}`;
  }

  private paymentRequest(n: number): { key: string; body: Buffer; headers: OutgoingHttpHeaders } {
    const key = `bench-${this.run}-${n}`;
    const body = Buffer.from(
      JSON.stringify({ order_id: `ord-${this.run}-${n}`, amount_minor: 1000 + (n % 9000), currency: 'EUR', payment_method: 'pm_card_visa' }),
    );
    return { key, body, headers: jsonHeaders({ ...this.auth(), 'idempotency-key': key }, body) };
  }

  /**
   * Payments answered 202 (still processing when the API's bounded wait ended: the stack is
   * saturated) and followed to their final state, as a client does, by polling GET.
   */
  static accepted = 0;

  /**
   * One new payment through the API, as a client sees it: the first response is 201
   * succeeded, or 202 processing followed by GETs every 100 ms until the payment succeeded.
   */
  async newPayment(): Promise<string | void> {
    return (await this.pay()).failure;
  }

  /** newPayment with the payment's id (when the API answered one): the failover timeline joins it with its attempts. */
  async pay(): Promise<{ id?: string; failure?: string }> {
    const n = ++this.counter;
    const { key, body, headers } = this.paymentRequest(n);
    const answer = await this.http.request('POST', '/v1/payments', headers, body);
    if (answer.status === 202) {
      const accepted = (JSON.parse(answer.body) as { id: string }).id;
      const failure = await this.followToFinal(accepted);
      return failure ? { id: accepted, failure } : { id: accepted };
    }
    if (answer.status !== 201) return { failure: `new payment: ${answer.status} ${answer.body.slice(0, 200)}` };
    const id = (JSON.parse(answer.body) as { id: string; status: string }).id;
    const entry = { key, body, id, response: answer.body, headers };
    if (this.finished.length < this.keep) this.finished.push(entry);
    else if (Math.random() < 0.1) this.finished[Math.floor(Math.random() * this.keep)] = entry;
    return { id };
  }

  private async followToFinal(id: string): Promise<string | void> {
    Scenarios.accepted++;
    for (;;) {
      await new Promise((r) => setTimeout(r, 100));
      const answer = await this.http.request('GET', `/v1/payments/${id}`, this.readHeaders);
      if (answer.status !== 200) return `new payment ${id} after 202: GET answered ${answer.status}`;
      const { status } = JSON.parse(answer.body) as { status: string };
      if (status === 'succeeded') return;
      if (status !== 'processing') return `new payment ${id} after 202: ended ${status}`;
    }
  }

  private pick(): FinishedPayment {
    return this.finished[Math.floor(Math.random() * this.finished.length)]!;
  }

  /** A replay of a finished payment: same key, same body; the stored bytes, marked replayed. */
  async replay(): Promise<string | void> {
    const payment = this.pick();
    const answer = await this.http.request('POST', '/v1/payments', payment.headers, payment.body);
    if (answer.status !== 201 || answer.headers['idempotent-replayed'] !== 'true') return `replay: ${answer.status} ${answer.body.slice(0, 200)}`;
    if (answer.body !== payment.response) return 'replay: body differs from the first response';
  }

  /** The plain route the replay is compared with: cached auth + one primary-key read. */
  async read(): Promise<string | void> {
    const payment = this.pick();
    const answer = await this.http.request('GET', `/v1/payments/${payment.id}`, this.readHeaders);
    if (answer.status !== 200) return `read: ${answer.status} ${answer.body.slice(0, 200)}`;
  }

  /**
   * One duplicate storm: `copies` identical requests at once under one new key. Returns each
   * request's latency and status and, once quiet, the effects counted at their sources.
   */
  async storm(copies: number): Promise<StormKeyResult> {
    const n = ++this.counter;
    const { body, headers } = this.paymentRequest(n);
    const answers = await Promise.all(
      Array.from({ length: copies }, async () => {
        const began = performance.now();
        const answer = await this.http.request('POST', '/v1/payments', headers, body);
        return { ms: performance.now() - began, status: answer.status, replayed: answer.headers['idempotent-replayed'] === 'true', body: answer.body };
      }),
    );
    const ids = new Set(answers.filter((a) => a.status === 201).map((a) => (JSON.parse(a.body) as { id: string }).id));
    const bodies = new Set(answers.filter((a) => a.status === 201).map((a) => a.body));
    const id = [...ids][0];
    const effects = id ? await this.effectsOf(id) : { charges: 0, ledgerTransactions: 0, events: 0 };
    return {
      latencies: answers.map((a) => a.ms),
      statuses: countBy(answers.map((a) => String(a.status))),
      replayed: answers.filter((a) => a.replayed).length,
      distinctPayments: ids.size,
      distinctBodies: bodies.size,
      ...effects,
    };
  }

  /** Charges at the default provider (by our reference; a tenant without routing charges only there), ledger transactions and outbox events of one payment. */
  async effectsOf(paymentId: string): Promise<{ charges: number; ledgerTransactions: number; events: number }> {
    const response = await fetch(`${this.stack.sandboxUrl}/v1/charges?reference=${encodeURIComponent(paymentId)}`);
    const charges = ((await response.json()) as { data: unknown[] }).data.length;
    const [counts] = await this.stack.sql<{ ledger: number; events: number }[]>`
      SELECT (SELECT count(*)::int FROM ledger_transactions WHERE payment_id = ${paymentId}) AS ledger,
             (SELECT count(*)::int FROM outbox_events
               WHERE tenant_id = ${this.tenant.id} AND event_key LIKE ${`payment:${paymentId}:%`}) AS events`;
    return { charges, ledgerTransactions: counts!.ledger, events: counts!.events };
  }
}

export interface StormKeyResult {
  latencies: number[];
  statuses: Record<string, number>;
  replayed: number;
  distinctPayments: number;
  distinctBodies: number;
  charges: number;
  ledgerTransactions: number;
  events: number;
}

function countBy(values: string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const value of values) counts[value] = (counts[value] ?? 0) + 1;
  return counts;
}

/** Row counts of the tables that hold history. */
export async function historyCounts(sql: Sql): Promise<Record<string, number>> {
  const [row] = await sql<Record<string, number>[]>`
    SELECT (SELECT count(*)::int FROM idempotency_records) AS idempotency_records,
           (SELECT count(*)::int FROM payments) AS payments,
           (SELECT count(*)::int FROM ledger_transactions) AS ledger_transactions,
           (SELECT count(*)::int FROM ledger_entries) AS ledger_entries,
           (SELECT count(*)::int FROM outbox_events) AS outbox_events`;
  return { ...row! };
}

/**
 * Adds `count` finished payments' worth of synthetic history for the tenant: per payment one
 * idempotency record (with a real-sized stored response), one payment, one ledger
 * transaction with its two entries, and one delivered-or-skipped outbox event, numbered from
 * `from`. Triggers and foreign-key checks are skipped (session_replication_role = replica)
 * for speed; the rows are consistent anyway (balanced entries, existing references).
 * Ids start with "00", so they sort before every real id, as older history does.
 */
export async function seedHistory(
  sql: Sql,
  tenantId: string,
  from: number,
  count: number,
  sample: { responseBody: string; paymentId: string },
  onProgress: (done: number) => void,
): Promise<void> {
  const [accounts] = await sql<{ receivable: number; merchant: number }[]>`
    SELECT (SELECT id FROM ledger_accounts WHERE tenant_id = ${tenantId} AND code = 'provider_receivable' AND currency = 'EUR') AS receivable,
           (SELECT id FROM ledger_accounts WHERE tenant_id = ${tenantId} AND code = 'merchant_balance' AND currency = 'EUR') AS merchant`;
  if (!accounts?.receivable || !accounts.merchant) throw new Error('seedHistory: the tenant has no EUR ledger accounts yet (run payments first)');
  const [column] = await sql<{ type: string }[]>`
    SELECT data_type AS type FROM information_schema.columns WHERE table_name = 'outbox_events' AND column_name = 'payload'`;
  const payloadType = column?.type === 'jsonb' ? 'jsonb' : 'json';
  const eventPayload = JSON.stringify({ id: 'EVT', object: 'event', type: 'payment.succeeded', created_at: new Date().toISOString(), data: { object: JSON.parse(sample.responseBody) as unknown } });
  const tables = historyTables;
  // Why: a large top-up is several times faster into tables without their secondary indexes,
  // built afterwards in one pass each (the indexes that back constraints stay).
  const indexes =
    count >= 50_000
      ? await sql<{ name: string; definition: string }[]>`
          SELECT i.indexrelid::regclass::text AS name, pg_get_indexdef(i.indexrelid) AS definition
          FROM pg_index i
          WHERE i.indrelid IN (SELECT unnest(${tables}::text[])::regclass)
            AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)`
      : [];
  for (const index of indexes) await sql.unsafe(`DROP INDEX ${index.name}`);
  const chunk = 100_000;
  for (let start = from; start < from + count; start += chunk) {
    const end = Math.min(from + count, start + chunk) - 1;
    await sql.begin(async (tx) => {
      await tx`SET LOCAL session_replication_role = replica`;
      await tx`SET LOCAL synchronous_commit = off`;
      const pid = tx`('pay_00' || lpad(to_hex(i), 24, '0'))`;
      await tx`
        INSERT INTO payments (id, tenant_id, order_id, amount_minor, currency, status, capture_method, payment_method,
                              metadata, amount_captured_minor, provider_charge_id, workflow_id, created_at, updated_at)
        SELECT ${pid}, ${tenantId}, 'hist-ord-' || i, 1000 + i % 9000, 'EUR', 'succeeded', 'automatic', 'pm_card_visa',
               '{}', 1000 + i % 9000, 'ch_hist_' || i, 'payment-' || ${tenantId} || '-k.hist-' || i,
               now() - interval '2 days', now() - interval '2 days'
        FROM generate_series(${start}::int, ${end}::int) i`;
      await tx`
        INSERT INTO idempotency_records (tenant_id, operation, idempotency_key, fingerprint, state, workflow_id, resource_id,
                                         response_status, response_body, response_location, created_at, completed_at, expires_at)
        SELECT ${tenantId}, 'POST /v1/payments', 'hist-' || i, md5(i::text) || md5('f' || i), 'completed',
               'payment-' || ${tenantId} || '-k.hist-' || i, ${pid}, 201, replace(${sample.responseBody}, ${sample.paymentId}, ${pid}),
               '/v1/payments/' || ${pid}, now() - interval '2 days', now() - interval '2 days', now() + interval '1 day'
        FROM generate_series(${start}::int, ${end}::int) i`;
      await tx`
        INSERT INTO ledger_transactions (id, tenant_id, event_key, payment_id, description, created_at)
        SELECT 'ltx_00' || lpad(to_hex(i), 24, '0'), ${tenantId}, 'payment:' || ${pid} || ':capture', ${pid},
               'capture of ' || ${pid}, now() - interval '2 days'
        FROM generate_series(${start}::int, ${end}::int) i`;
      await tx`
        INSERT INTO ledger_entries (transaction_id, line, account_id, currency, amount_minor)
        SELECT 'ltx_00' || lpad(to_hex(i), 24, '0'), CASE WHEN side = 1 THEN 1 ELSE 2 END, CASE WHEN side = 1 THEN ${accounts.receivable}::bigint ELSE ${accounts.merchant}::bigint END,
               'EUR', side * (1000 + i % 9000)
        FROM generate_series(${start}::int, ${end}::int) i, (VALUES (1), (-1)) AS sides(side)`;
      await tx.unsafe(
        `INSERT INTO outbox_events (id, tenant_id, type, event_key, payload, created_at, delivery_state, next_attempt_at)
         SELECT 'evt_00' || lpad(to_hex(i), 24, '0'), $1, 'payment.succeeded', 'payment:' || ('pay_00' || lpad(to_hex(i), 24, '0')) || ':payment.succeeded',
                replace(replace($2, 'EVT', 'evt_00' || lpad(to_hex(i), 24, '0')), $3, 'pay_00' || lpad(to_hex(i), 24, '0'))::${payloadType},
                now() - interval '2 days', 'skipped', now() - interval '2 days'
         FROM generate_series($4::int, $5::int) i`,
        [tenantId, eventPayload, sample.paymentId, start, end],
      );
    });
    onProgress(end - from + 1);
  }
  if (indexes.length) {
    await sql.begin(async (tx) => {
      await tx`SET LOCAL maintenance_work_mem = '256MB'`;
      for (const index of indexes) await tx.unsafe(index.definition);
    });
  }
  // Fresh statistics and visibility maps, as a table that grew over months would have.
  await vacuumLane(sql, { checkpoint: true });
}


/**
 * VACUUM ANALYZE a lane's history tables; with `checkpoint`, then a CHECKPOINT (the whole
 * cluster's) and the kernel's write-back flushed.
 */
export async function vacuumLane(sql: Sql, options: { checkpoint?: boolean } = {}): Promise<void> {
  for (const table of historyTables) await sql.unsafe(`VACUUM ANALYZE ${table}`);
  if (!options.checkpoint) return;
  await sql`CHECKPOINT`;
  await flushWriteback();
}

/**
 * Seeding writes gigabytes; left to the kernel, their write-back would run during the next
 * measurements (measured here: every process's CPU per operation up 20-50%, the floor's too,
 * which touches no table). Flush it now and give the machine a few seconds.
 */
async function flushWriteback(): Promise<void> {
  const pending = () => {
    const meminfo = readFileSync('/proc/meminfo', 'utf8');
    const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(meminfo)?.[1] ?? 0);
    return kb('Dirty') + kb('Writeback');
  };
  execSync('sync');
  for (let i = 0; i < 30 && pending() > 64 * 1024; i++) await new Promise((r) => setTimeout(r, 500));
  await new Promise((r) => setTimeout(r, 3000));
}

/** Shared-buffer blocks one execution of a statement touched (EXPLAIN ANALYZE, BUFFERS), averaged over samples. */
export interface StatementBuffers {
  hit: number;
  read: number;
  ms: number;
}

/**
 * The hot statements of a payment and a replay, executed for real under EXPLAIN (ANALYZE,
 * BUFFERS) against the lane's tables, writes rolled back: how many shared-buffer pages each
 * touches (hits) and how many came from outside PostgreSQL's cache (reads). Compared between
 * the 1× and the grown lane, they say whether a bigger table costs more pages per operation
 * (index depth, bloat) or whether a slower figure is the machine's noise.
 */
export async function hotStatementBuffers(lane: Scenarios, samples = 20): Promise<Record<string, StatementBuffers>> {
  const tenant = lane.tenant.id;
  const statements: Record<string, (n: number, payment: FinishedPayment) => string> = {
    'replay lookup (idempotency record by key)': (_n, p) =>
      `SELECT * FROM idempotency_records WHERE tenant_id = '${tenant}' AND operation = 'POST /v1/payments' AND idempotency_key = '${p.key}'`,
    'GET payment by id': (_n, p) => `SELECT * FROM payments WHERE id = '${p.id}' AND tenant_id = '${tenant}'`,
    'claim (INSERT idempotency record)': (n) =>
      `INSERT INTO idempotency_records (tenant_id, operation, idempotency_key, fingerprint, state, workflow_id, resource_id, expires_at)
       VALUES ('${tenant}', 'POST /v1/payments', 'explain-${n}-${randomBytes(4).toString('hex')}', 'f', 'running', 'wf', 'pay_explain_${n}', now() + interval '1 day')
       ON CONFLICT (tenant_id, operation, idempotency_key) DO NOTHING RETURNING *`,
    'intent (INSERT payment, order guard)': (n) =>
      `INSERT INTO payments (id, tenant_id, order_id, amount_minor, currency, status, capture_method, payment_method, metadata, workflow_id)
       VALUES ('pay_explain_${n}_${randomBytes(4).toString('hex')}', '${tenant}', 'explain-ord-${n}-${randomBytes(4).toString('hex')}', 1000, 'EUR', 'processing', 'automatic', 'pm_card_visa', '{}', 'wf')
       ON CONFLICT DO NOTHING RETURNING id`,
    'ledger (INSERT transaction)': (n, p) =>
      `INSERT INTO ledger_transactions (id, tenant_id, event_key, payment_id, description)
       VALUES ('ltx_explain_${n}_${randomBytes(4).toString('hex')}', '${tenant}', 'explain:${n}:${randomBytes(4).toString('hex')}', '${p.id}', 'x')
       ON CONFLICT (tenant_id, event_key) DO NOTHING RETURNING id`,
  };
  const result: Record<string, StatementBuffers> = {};
  for (const [name, statement] of Object.entries(statements)) {
    let hit = 0;
    let read = 0;
    let ms = 0;
    for (let n = 0; n < samples; n++) {
      const payment = lane.finished[Math.floor(Math.random() * lane.finished.length)]!;
      const plan = await lane.sql
        .begin(async (tx) => {
          const [row] = await tx.unsafe<{ 'QUERY PLAN': ExplainPlan[] }[]>(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${statement(n, payment)}`);
          throw new ExplainDone(row!['QUERY PLAN'][0]!);
        })
        .catch((error: unknown) => {
          if (error instanceof ExplainDone) return error.plan;
          throw error;
        });
      hit += plan.Plan['Shared Hit Blocks'] ?? 0;
      read += plan.Plan['Shared Read Blocks'] ?? 0;
      ms += plan['Execution Time'] ?? 0;
    }
    result[name] = { hit: round2(hit / samples), read: round2(read / samples), ms: round2(ms / samples) };
  }
  return result;
}

interface ExplainPlan {
  Plan: { 'Shared Hit Blocks'?: number; 'Shared Read Blocks'?: number };
  'Execution Time'?: number;
}

/** Rolls the EXPLAIN's transaction back (its writes never land) while carrying the plan out. */
class ExplainDone extends Error {
  constructor(readonly plan: ExplainPlan) {
    super('explain done');
  }
}

const round2 = (n: number) => Math.round(n * 100) / 100;
