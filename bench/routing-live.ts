/**
 * `npm run bench -- routing-live [--payments N] [--clients C] [--out DIR]`: success-rate routing
 * on the real stack (bench/stack.ts: the Temporal dev server, PostgreSQL, the compiled API and
 * worker, two sandboxes). The sandboxes' issuers answer at fixed rates (POST
 * /_sandbox/approval_rates): sandbox-a approves Visa 0.90 and Mastercard 0.60, sandbox-b the
 * reverse. One tenant routes by `{"strategy":"success_rate"}` over both; N payments (default
 * 2000), each a Visa or a Mastercard at random, from C clients (default 8). The oracle, always
 * the better PSP for the card, approves 0.90; over the last half of the payments (by start) ours
 * must reach at least the oracle minus exploration's cost minus two standard errors. Also
 * counted: payments charged more than once at the PSPs (must be 0). Writes
 * routing-live.{md,json} to DIR (default bench/results).
 */
import { randomUUID } from 'node:crypto';
import { SUCCESS_RATE_DEFAULTS } from '../domain/routing-success-rate';
import { benchAdminUrl, option, writeResults } from './common';
import { seeded } from './routing-sim/sim';
import { startBenchStack, type BenchStack } from './stack';

const RATES = {
  'sandbox-a': [
    { network: 'visa', currency: '*', rate: 0.9 },
    { network: 'mastercard', currency: '*', rate: 0.6 },
  ],
  'sandbox-b': [
    { network: 'visa', currency: '*', rate: 0.6 },
    { network: 'mastercard', currency: '*', rate: 0.9 },
  ],
} as const;
const BEST: Record<string, string> = { visa: 'sandbox-a', mastercard: 'sandbox-b' };
const ORACLE = 0.9;
const WORSE = 0.6;

interface Paid {
  index: number;
  network: 'visa' | 'mastercard';
  httpStatus: number;
  status: string;
  provider: string | null;
  chosen: string | null;
  explored: boolean | null;
}

async function post(stack: BenchStack, pathName: string, body: unknown, headers: Record<string, string>): Promise<{ status: number; json: Record<string, unknown> }> {
  const response = await fetch(`${stack.apiUrl}${pathName}`, { method: pathName.startsWith('/admin/tenants/') ? 'PATCH' : 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: response.status, json: (await response.json()) as Record<string, unknown> };
}

async function setRates(stack: BenchStack): Promise<void> {
  for (const sandbox of stack.sandboxes) {
    const rates = RATES[sandbox.name as keyof typeof RATES];
    const response = await fetch(`${sandbox.url}/_sandbox/approval_rates`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ rates }) });
    if (response.status !== 200) throw new Error(`${sandbox.name} approval rates: ${response.status} ${await response.text()}`);
  }
}

async function successRateTenant(stack: BenchStack): Promise<string> {
  const admin = { authorization: `Bearer ${stack.adminToken}` };
  const created = await post(stack, '/admin/tenants', { name: 'routing-live' }, admin);
  if (created.status !== 201) throw new Error(`tenant: ${created.status} ${JSON.stringify(created.json)}`);
  const routing = await post(stack, `/admin/tenants/${String(created.json.id)}`, { routing: { strategy: 'success_rate', fallback: ['sandbox-a', 'sandbox-b'] } }, admin);
  if (routing.status !== 200) throw new Error(`routing: ${routing.status} ${JSON.stringify(routing.json)}`);
  return String(created.json.api_key);
}

async function pay(stack: BenchStack, apiKey: string, index: number, network: Paid['network']): Promise<Paid> {
  const body = { order_id: `live-${index}-${randomUUID()}`, amount_minor: 2500, currency: 'EUR', payment_method: network === 'visa' ? 'pm_card_visa' : 'pm_card_mastercard' };
  const { status, json } = await post(stack, '/v1/payments', body, { authorization: `Bearer ${apiKey}`, 'idempotency-key': randomUUID() });
  // A declined payment is answered 402 card_declined with the payment in the error.
  const error = json.error as { type?: string; payment?: Record<string, unknown> } | undefined;
  const payment = error?.payment ?? (error ? {} : json);
  const routing = payment.routing as { chosen?: string; explored?: boolean } | undefined;
  return { index, network, httpStatus: status, status: String(payment.status ?? error?.type ?? status), provider: (payment.provider as string | undefined) ?? null, chosen: routing?.chosen ?? null, explored: routing?.explored ?? null };
}

/** Payments with more than one charge that took money, across both PSPs (each sandbox keeps its own database). */
async function chargedTwice(stack: BenchStack): Promise<number> {
  const references = new Map<string, number>();
  for (const sandbox of stack.sandboxes) {
    const rows = await sandbox.sql<{ reference: string; n: number }[]>`
      SELECT reference, count(*)::int AS n FROM sandbox.charges WHERE status IN ('succeeded', 'requires_capture') GROUP BY reference`;
    for (const row of rows) references.set(row.reference, (references.get(row.reference) ?? 0) + row.n);
  }
  return [...references.values()].filter((n) => n > 1).length;
}

function summarise(paid: Paid[], from: number) {
  const part = paid.filter((p) => p.index >= from);
  const approved = part.filter((p) => p.status === 'succeeded').length;
  const rate = approved / part.length;
  const se = Math.sqrt((rate * (1 - rate)) / part.length);
  const atBest = part.filter((p) => p.chosen === BEST[p.network]).length;
  return { payments: part.length, approved, rate, se, atBestShare: atBest / part.length, explored: part.filter((p) => p.explored).length, notRouted: part.filter((p) => p.chosen === null).length };
}

export async function runRoutingLiveBench(args: readonly string[]): Promise<void> {
  const count = Number(option(args, '--payments', '2000'));
  const clients = Number(option(args, '--clients', '8'));
  const out = option(args, '--out', 'bench/results');
  const stack = await startBenchStack({
    adminUrl: benchAdminUrl,
    temporalStore: 'file',
    temporalMode: 'dev',
    payloadEncryption: true,
    paymentAnswer: 'notify',
    log: (line) => console.log(line),
  });
  try {
    await setRates(stack);
    const apiKey = await successRateTenant(stack);
    const random = seeded(2024);
    const networks = Array.from({ length: count }, () => (random() < 0.5 ? 'visa' : 'mastercard') as Paid['network']);
    const paid: Paid[] = [];
    let next = 0;
    const started = Date.now();
    await Promise.all(
      Array.from({ length: clients }, async () => {
        for (let index = next++; index < count; index = next++) {
          paid.push(await pay(stack, apiKey, index, networks[index]!));
          if (paid.length % 250 === 0) console.log(`${paid.length}/${count} payments`);
        }
      }),
    );
    const seconds = Math.round((Date.now() - started) / 100) / 10;
    paid.sort((a, b) => a.index - b.index);
    const exploration = SUCCESS_RATE_DEFAULTS.exploration;
    // Exploration's floor sends exploration/2 of each segment's payments to the worse PSP (two candidates).
    const explorationCost = (exploration / 2) * (ORACLE - WORSE);
    const first = summarise(paid, 0);
    const last = summarise(paid, count - Math.floor(count / 2));
    const target = ORACLE - explorationCost - 2 * last.se;
    const twice = await chargedTwice(stack);
    const byStatus = Object.fromEntries([...new Set(paid.map((p) => p.status))].map((s) => [s, paid.filter((p) => p.status === s).length]));
    const results = { payments: count, clients, seconds, rates: RATES, oracle: ORACLE, exploration, explorationCost, all: first, lastHalf: last, target, met: last.rate >= target && twice === 0, chargedTwice: twice, byStatus, node: process.version };
    writeResults(out, 'routing-live', results, report(results));
  } finally {
    await stack.stop();
  }
}

const pct = (x: number) => `${(x * 100).toFixed(1)} %`;

function report(r: { payments: number; clients: number; seconds: number; oracle: number; exploration: number; explorationCost: number; all: ReturnType<typeof summarise>; lastHalf: ReturnType<typeof summarise>; target: number; met: boolean; chargedTwice: number; byStatus: Record<string, number>; node: string }): string {
  return [
    '# Success-rate routing on the real stack',
    '',
    `\`npm run bench -- routing-live\` (bench/routing-live.ts): ${r.payments} payments from ${r.clients} clients in ${r.seconds} s on the bench stack (the Temporal dev server, PostgreSQL, the compiled API and worker, two sandboxes), Node ${r.node}. One tenant routes by \`{"strategy":"success_rate","fallback":["sandbox-a","sandbox-b"]}\` (pooled scope, exploration ${r.exploration}); each payment is a Visa or a Mastercard in EUR, half and half at random (seed 2024). The sandboxes' issuers: sandbox-a approves Visa 0.90 and Mastercard 0.60, sandbox-b the reverse (POST /_sandbox/approval_rates), so the oracle (the better PSP for each card) approves ${r.oracle}.`,
    '',
    '| payments | approved | approval rate | standard error | first attempt at the better PSP | explored | not decided by success rate |',
    '|---|---|---|---|---|---|---|',
    `| all ${r.all.payments} | ${r.all.approved} | ${pct(r.all.rate)} | ${pct(r.all.se)} | ${pct(r.all.atBestShare)} | ${r.all.explored} | ${r.all.notRouted} |`,
    `| last ${r.lastHalf.payments} | ${r.lastHalf.approved} | ${pct(r.lastHalf.rate)} | ${pct(r.lastHalf.se)} | ${pct(r.lastHalf.atBestShare)} | ${r.lastHalf.explored} | ${r.lastHalf.notRouted} |`,
    '',
    `Target over the last ${r.lastHalf.payments}: the oracle ${r.oracle} minus exploration's cost ${r.explorationCost.toFixed(4)} (the floor sends ${r.exploration}/2 of each card's payments to the worse PSP, which approves 0.30 less) minus two standard errors ${(2 * r.lastHalf.se).toFixed(4)} = **${r.target.toFixed(4)}**; reached ${r.lastHalf.rate.toFixed(4)}: ${r.met ? 'met' : 'NOT met'}.`,
    `Payments charged more than once across both PSPs (sandbox.charges that took money, by our reference): **${r.chargedTwice}**. Outcomes: ${Object.entries(r.byStatus).map(([s, n]) => `${s} ${n}`).join(', ')}.`,
    '',
  ].join('\n');
}
