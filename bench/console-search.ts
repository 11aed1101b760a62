/**
 * `npm run bench -- console-search [--payments N] [--queries Q] [--out DIR]`: the console's payment
 * search (db/console.ts searchPayments, the statement the console runs) on a table of N payments
 * (default 1 000 000), without Temporal. It makes its own database (console_search_bench, dropped
 * and made again), migrates it, seeds N payments over 90 days, 20 tenants and 4 PSPs (one rare), a
 * third of them with one of 50 000 customers, one charge attempt each, then runs Q searches per
 * filter (default 200, each with another value drawn from the seeded rows), one after another, and
 * reports p50/p95/max per filter with the plan's indexes. Writes console-search.{md,json} to DIR
 * (default bench/results).
 */
import { performance } from 'node:perf_hooks';
import type { Sql } from '../db/connect';
import { searchPayments, searchPaymentsPlan, type PaymentSearch } from '../db/console';
import { newId } from '../domain/ids';
import { freshDatabase, option, percentiles, writeResults } from './common';
import { seeded } from './routing-sim/sim';

const DATABASE = 'console_search_bench';
const DAY = 24 * 60 * 60 * 1000;
const DAYS = 90;
const TENANTS = 20;
const CUSTOMERS = 50_000;
const BATCH = 5_000;
/** PSP names with their share of payments: the last one is rare, so its filter takes its own index. */
const PSPS: [string, number][] = [['psp-a', 0.5], ['psp-b', 0.3], ['psp-c', 0.195], ['psp-rare', 0.005]];
/** Status shares, as a busy merchant's table holds them. */
const STATUSES: [string, number][] = [['succeeded', 0.82], ['declined', 0.08], ['failed', 0.03], ['refunded', 0.03], ['canceled', 0.02], ['expired', 0.01], ['requires_capture', 0.006], ['processing', 0.003], ['requires_action', 0.001]];

function pick<T>(shares: [T, number][], u: number): T {
  let at = 0;
  for (const [value, share] of shares) if (u < (at += share)) return value;
  return shares[shares.length - 1]![0];
}

const tenantId = (n: number) => `ten_bench${String(n).padStart(2, '0')}`;
const customerId = (n: number) => `cus_bench${String(n).padStart(18, '0')}`;
const email = (n: number) => `customer${n}@example.com`;

/** What the filters' values are drawn from: a sample of the seeded rows. */
interface Drawn {
  payments: { id: string; tenant: string; order: string }[];
  customers: number[];
}

async function seed(sql: Sql, count: number, random: () => number): Promise<Drawn> {
  const now = Date.now();
  for (let t = 0; t < TENANTS; t++) {
    await sql`INSERT INTO tenants (id, name, api_key_hash, api_key_prefix, webhook_secret) VALUES (${tenantId(t)}, 'bench', ${Buffer.alloc(32, t)}, 'pk_bench', 'whsec_bench')`;
  }
  for (let c = 0; c < CUSTOMERS; c += BATCH) {
    const rows = Array.from({ length: Math.min(BATCH, CUSTOMERS - c) }, (_, i) => ({ id: customerId(c + i), tenant_id: tenantId((c + i) % TENANTS), email: email(c + i) }));
    await sql`INSERT INTO customers ${sql(rows)}`;
  }
  const drawn: Drawn = { payments: [], customers: [] };
  for (let p = 0; p < count; p += BATCH) {
    const payments = [];
    const attempts = [];
    for (let i = p; i < Math.min(count, p + BATCH); i++) {
      // Oldest first, evenly over the days, as a table grows.
      const at = new Date(now - DAYS * DAY + Math.floor((i / count) * DAYS * DAY));
      const id = newId('pay', at.getTime());
      const tenant = tenantId(Math.floor(random() * TENANTS));
      const customer = random() < 1 / 3 ? Math.floor(random() * CUSTOMERS) : null;
      const status = pick(STATUSES, random());
      const provider = pick(PSPS, random());
      const order = `order-${i}`;
      payments.push({ id, tenant_id: tenant, order_id: order, amount_minor: 100 + Math.floor(random() * 100_000), currency: 'EUR', status, capture_method: 'automatic', payment_method: 'pm_card_visa', workflow_id: `payment-${tenant}-k.${i}`, provider, customer_id: customer === null ? null : customerId(customer), created_at: at, updated_at: at });
      attempts.push({ payment_id: id, attempt: 1, provider, outcome: status === 'declined' ? 'declined' : 'succeeded', started_at: at, finished_at: at });
      if (i % Math.ceil(count / 1000) === 0) drawn.payments.push({ id, tenant, order });
      if (customer !== null && drawn.customers.length < 1000 && random() < 0.01) drawn.customers.push(customer);
    }
    await sql`INSERT INTO payments ${sql(payments)}`;
    await sql`INSERT INTO payment_attempts ${sql(attempts)}`;
    if ((p / BATCH) % 20 === 0) console.log(`seeded ${p + payments.length} payments`);
  }
  await sql`VACUUM ANALYZE payments`;
  await sql`VACUUM ANALYZE payment_attempts`;
  await sql`VACUUM ANALYZE customers`;
  return drawn;
}

/** Each filter of the console's search, with how a query's value is drawn. */
function filters(drawn: Drawn, random: () => number): Record<string, () => PaymentSearch> {
  const any = <T>(values: readonly T[]): T => values[Math.floor(random() * values.length)]!;
  const dayOf = () => new Date(Date.now() - Math.ceil(random() * (DAYS - 1)) * DAY);
  const page = { limit: 50 };
  return {
    'payment id': () => ({ ...page, paymentId: any(drawn.payments).id }),
    'order id': () => ({ ...page, orderId: any(drawn.payments).order }),
    'customer (cus_ id)': () => ({ ...page, customerId: customerId(any(drawn.customers)) }),
    'customer (email)': () => ({ ...page, customerEmail: email(any(drawn.customers)).toUpperCase() }),
    'PSP (common: psp-a, 50 %)': () => ({ ...page, provider: 'psp-a' }),
    'PSP (rare: psp-rare, 0.5 %)': () => ({ ...page, provider: 'psp-rare' }),
    'status (common: succeeded)': () => ({ ...page, status: 'succeeded' }),
    'status (rare: requires_action)': () => ({ ...page, status: 'requires_action' }),
    tenant: () => ({ ...page, tenantId: any(drawn.payments).tenant }),
    'date range (one day)': () => {
      const from = dayOf();
      return { ...page, from, to: new Date(from.getTime() + DAY) };
    },
    'tenant + status (rare)': () => ({ ...page, tenantId: any(drawn.payments).tenant, status: 'requires_action' }),
    'tenant + date range': () => {
      const from = dayOf();
      return { ...page, tenantId: any(drawn.payments).tenant, from, to: new Date(from.getTime() + DAY) };
    },
    'second page (tenant, after a cursor)': () => {
      const { id, tenant } = any(drawn.payments);
      return { ...page, tenantId: tenant, startingAfter: id };
    },
  };
}

/** The indexes a plan uses, by name. */
function indexesOf(plan: string): string[] {
  return [...new Set([...plan.matchAll(/Index (?:Only )?Scan(?: Backward)? using (\S+)|Bitmap Index Scan on (\S+)/g)].map((m) => (m[1] ?? m[2])!))];
}

interface FilterResult {
  filter: string;
  ms: ReturnType<typeof percentiles>;
  rowsMean: number;
  indexes: string[];
  seqScan: boolean;
}

export async function runConsoleSearchBench(args: readonly string[]): Promise<void> {
  const count = Number(option(args, '--payments', '1000000'));
  const queries = Number(option(args, '--queries', '200'));
  const out = option(args, '--out', 'bench/results');
  const sql = await freshDatabase(DATABASE, 2);
  try {
    const random = seeded(4242);
    const seedStarted = performance.now();
    const drawn = await seed(sql, count, random);
    const seedSeconds = Math.round((performance.now() - seedStarted) / 100) / 10;
    const results: FilterResult[] = [];
    for (const [filter, draw] of Object.entries(filters(drawn, random))) {
      const plan = await searchPaymentsPlan(sql, draw());
      for (let i = 0; i < 10; i++) await searchPayments(sql, draw()); // warm: plans, pages in the cache
      const samples: number[] = [];
      let rows = 0;
      for (let i = 0; i < queries; i++) {
        const search = draw();
        const started = performance.now();
        const page = await searchPayments(sql, search);
        samples.push(performance.now() - started);
        rows += page.rows.length;
      }
      results.push({ filter, ms: percentiles(samples), rowsMean: Math.round((rows / queries) * 10) / 10, indexes: indexesOf(plan), seqScan: /Seq Scan/.test(plan) });
      console.log(`${filter}: p95 ${results.at(-1)!.ms.p95} ms`);
    }
    const [sizes] = await sql<{ payments: string; attempts: string }[]>`
      SELECT pg_size_pretty(pg_total_relation_size('payments')) AS payments, pg_size_pretty(pg_total_relation_size('payment_attempts')) AS attempts`;
    const postgres = (await sql<{ server_version: string }[]>`SHOW server_version`)[0]?.server_version ?? null;
    const summary = { payments: count, queriesPerFilter: queries, seedSeconds, tables: sizes, postgres, node: process.version, results };
    writeResults(out, 'console-search', summary, report(summary));
  } finally {
    await sql.end();
  }
}

function report(summary: { payments: number; queriesPerFilter: number; seedSeconds: number; tables?: { payments: string; attempts: string } | undefined; postgres: string | null; node: string; results: FilterResult[] }): string {
  const lines = [
    '# Console search at scale',
    '',
    `\`npm run bench -- console-search\` (bench/console-search.ts): ${summary.payments.toLocaleString('en')} payments (tables: payments ${summary.tables?.payments ?? '?'}, payment_attempts ${summary.tables?.attempts ?? '?'}; seeded in ${summary.seedSeconds} s) over 90 days, 20 tenants, 4 PSPs (psp-rare 0.5 %), a third with one of 50,000 customers, on the local PostgreSQL ${summary.postgres ?? ''}, Node ${summary.node}, no Temporal. Each filter: ${summary.queriesPerFilter} searches one after another, each with a value drawn from the seeded rows, through db/console.ts searchPayments (the console's own statement: 50 newest first). Milliseconds per search, client side; the machine is shared (2 cores). "indexes" are those of one search's plan (EXPLAIN); no filter's plan has a sequential scan unless the column says so.`,
    '',
    '| filter | n | p50 | p95 | max | rows per page | indexes | seq scan |',
    '|---|---|---|---|---|---|---|---|',
    ...summary.results.map((r) => `| ${r.filter} | ${r.ms.n} | ${r.ms.p50} | ${r.ms.p95} | ${r.ms.max} | ${r.rowsMean} | ${r.indexes.join(', ')} | ${r.seqScan ? 'yes' : 'no'} |`),
    '',
  ];
  return lines.join('\n');
}
