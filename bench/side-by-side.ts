/**
 * Two settings of the bench side by side, from the reports of alternating runs:
 * `npx tsx bench/side-by-side.ts <label>=<report.json> ...` prints, as markdown, each run's new
 * payments against the floor and the empty workflow (the report's "New payments vs the floor":
 * medians of per-round ratios, the range in brackets) and its CPU per payment at 8 clients by
 * process (its "Where the CPU goes"). The comparisons in bench/results/ (eager-payments.md) are
 * this script's output over the reports committed beside them.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { formatRatio, roundRatio } from './load';
import type { BenchResults } from './report';

const runs = process.argv.slice(2).map((argument) => {
  const at = argument.indexOf('=');
  if (at < 1) throw new Error(`expected <label>=<report.json>, got ${argument}`);
  return { label: argument.slice(0, at), results: JSON.parse(readFileSync(path.resolve(argument.slice(at + 1)), 'utf8')) as BenchResults };
});
if (runs.length === 0) {
  console.error('usage: npx tsx bench/side-by-side.ts <label>=<report.json> ...');
  process.exit(2);
}

const lines = [
  '| run | started | clients | payments /s | payments p50 ms | throughput ÷ floor | p50 ÷ floor | throughput ÷ empty |',
  '|---|---|---:|---:|---:|---:|---:|---:|',
];
for (const { label, results } of runs) {
  for (const [clients, payments] of Object.entries(results.payments)) {
    const floor = results.floor[Number(clients)]!;
    const empty = results.empty?.[Number(clients)];
    lines.push(
      `| ${label} | ${results.startedAt} | ${clients} | ${payments.throughput} | ${payments.latency.p50} | ${formatRatio(roundRatio(payments, floor, (r) => r.throughput))} | ` +
        `${formatRatio(roundRatio(payments, floor, (r) => r.p50))} | ${empty ? formatRatio(roundRatio(payments, empty, (r) => r.throughput)) : '–'} |`,
    );
  }
}

const processes = ['api', 'worker', 'temporal', 'postgres', 'sandbox-a', 'total'];
lines.push('', `| run | ${processes.join(' | ')} |`, `|---|${processes.map(() => '---:').join('|')}|`);
for (const { label, results } of runs) {
  const cpu = results.payments[8]?.cpuPerOperation as Record<string, number> | undefined;
  if (cpu) lines.push(`| ${label} | ${processes.map((name) => cpu[name] ?? '–').join(' | ')} |`);
}
console.log(lines.join('\n'));
