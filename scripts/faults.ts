/**
 * npm run faults [-- <vitest filters…>] [--parallel]
 *
 * The fault suite (test/faults) with long trial counts, against the real stack (the vitest
 * global setup's Temporal dev server and fresh database; the scenarios add their own
 * PostgreSQL, Temporal server and worker processes where they take one away). Then the
 * table: per scenario, trials, duplicate effects, lost effects and time to recover,
 * printed and written to test/faults/results/latest.{json,md} (committed: the figures of the
 * last full run) or, for a run filtered to some scenarios, to test/artifacts/faults-results.{json,md}.
 * Ends with the plain line "N passed, N failed".
 *
 * Environment: FAULT_TRIALS (default 20: each crash scenario kills or stops something that
 * many times), FAULT_STORM_KEYS (default 6 keys stormed at once per round), FAULT_QUIET_MS (default 120000: how long the system has to go quiet after a fault).
 * Scenario files run one after another unless --parallel: the recovery times are then not
 * inflated by the other scenarios sharing the machine.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { projectRoot } from '../devstack/temporal-cli';
import { renderMarkdown, renderText, type ScenarioResult } from '../devstack/fault-table';

const args = process.argv.slice(2);
const parallel = args.includes('--parallel');
const filters = args.filter((a) => a !== '--parallel');
const trials = process.env.FAULT_TRIALS ?? '20';
const stormKeys = process.env.FAULT_STORM_KEYS ?? '6';
const artifacts = path.join(projectRoot, 'test', 'artifacts');
const runDir = path.join(artifacts, 'faults-run');
const vitestJson = path.join(artifacts, 'faults-vitest.json');
const full = filters.length === 0;
const outJson = full ? path.join(projectRoot, 'test', 'faults', 'results', 'latest.json') : path.join(artifacts, 'faults-results.json');
const outMarkdown = outJson.replace(/\.json$/, '.md');

rmSync(runDir, { recursive: true, force: true });
rmSync(vitestJson, { force: true });
mkdirSync(runDir, { recursive: true });

const started = Date.now();
console.log(`fault suite: FAULT_TRIALS=${trials} FAULT_STORM_KEYS=${stormKeys}, files ${parallel ? 'in parallel' : 'one at a time'}\n`);
const vitest = path.join(projectRoot, 'node_modules', 'vitest', 'vitest.mjs');
const exitCode = await new Promise<number>((resolve) => {
  const child = spawn(
    process.execPath,
    [
      vitest,
      'run',
      ...(filters.length ? filters.map((f) => (f.startsWith('test/') ? f : `test/faults/${f}`)) : ['test/faults']),
      '--reporter=default',
      '--reporter=json',
      `--outputFile.json=${vitestJson}`,
      ...(parallel ? [] : ['--no-file-parallelism']),
    ],
    {
      cwd: projectRoot,
      stdio: 'inherit',
      env: { ...process.env, FAULT_TRIALS: trials, FAULT_STORM_KEYS: stormKeys, FAULT_RESULTS_DIR: runDir, FAULT_LOGS_DIR: path.join(runDir, 'logs') },
    },
  );
  child.once('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
});

const results: ScenarioResult[] = readdirSync(runDir)
  .filter((f) => f.endsWith('.json'))
  .map((f) => JSON.parse(readFileSync(path.join(runDir, f), 'utf8')) as ScenarioResult)
  .sort((a, b) => a.id.localeCompare(b.id));

let passed = 0;
let failed = 0;
let skipped = 0;
if (existsSync(vitestJson)) {
  const report = JSON.parse(readFileSync(vitestJson, 'utf8')) as { numPassedTests: number; numFailedTests: number; numPendingTests: number; numTodoTests: number };
  passed = report.numPassedTests;
  failed = report.numFailedTests;
  skipped = report.numPendingTests + report.numTodoTests;
} else {
  failed = 1; // vitest did not get as far as its report
}

const durationMs = Date.now() - started;
const unclean = results.filter((r) => r.duplicateEffects || r.lostEffects || r.anomalies.length);
const targetMet = results.length > 0 && results.every((r) => r.duplicateEffects === 0 && r.lostEffects === 0);
const summary = {
  generatedAt: new Date().toISOString(),
  durationMs,
  settings: { FAULT_TRIALS: Number(trials), FAULT_STORM_KEYS: Number(stormKeys), parallel, filters },
  machine: { cpus: availableParallelism(), node: process.version, platform: `${process.platform}-${process.arch}` },
  tests: { passed, failed, skipped },
  target: 'zero duplicate effects and zero lost effects in every row',
  met: targetMet,
  /** Rows with unexpected answers or broken trials: not effects, but the scenario did not run clean. */
  unclean: unclean.map((r) => r.id),
  scenarios: results,
};
mkdirSync(path.dirname(outJson), { recursive: true });
writeFileSync(outJson, `${JSON.stringify(summary, null, 2)}\n`);
const heading = `Fault suite: effectively-once under failure (${new Date(summary.generatedAt).toISOString().slice(0, 16)}Z)`;
const markdown = [
  renderMarkdown(results, heading).trimEnd(),
  '',
  `Settings: FAULT_TRIALS=${trials}, FAULT_STORM_KEYS=${stormKeys}, scenario files ${parallel ? 'in parallel' : 'one at a time'}; ` +
    `${summary.machine.cpus} CPUs, Node ${summary.machine.node}; took ${(durationMs / 60_000).toFixed(1)} min.`,
  `Target: zero duplicate effects and zero lost effects in every row: ${summary.met ? 'met' : 'NOT met'}.` +
    (unclean.length ? ` Rows with anomalies: ${unclean.map((r) => r.id).join(', ')}.` : ''),
  '',
  `${passed} passed, ${failed} failed`,
  '',
].join('\n');
writeFileSync(outMarkdown, markdown);

console.log(`\n${renderText(results)}\n`);
for (const r of unclean) {
  console.log(`${r.scenario}:`);
  for (const line of [...r.findings, ...r.anomalies].slice(0, 10)) console.log(`  ${line.split('\n')[0]}`);
}
console.log(`target (zero duplicates, zero losses in every row): ${summary.met ? 'met' : 'NOT met'}${unclean.length ? `; rows with anomalies: ${unclean.length}` : ''}`);
console.log(`written: ${path.relative(projectRoot, outMarkdown)}, ${path.relative(projectRoot, outJson)} (${(durationMs / 60_000).toFixed(1)} min)`);
if (skipped) console.log(`${skipped} skipped`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(exitCode !== 0 || failed > 0 || !summary.met || unclean.length > 0 ? 1 : 0);
