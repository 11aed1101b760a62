import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { RESULTS_DIR } from './config';
import type { Judgement } from './census';

/** One row of the fault table, with the evidence behind it. */
export interface ScenarioResult {
  /** Stable id, also the fragment's file name; the table is sorted by it. */
  id: string;
  scenario: string;
  trials: number;
  /** Payments (or events) whose effects were counted. */
  subjects: number;
  subjectKind: string;
  /** Effects that happened more than once: extra charges, ledger postings, events, payments, runs. */
  duplicateEffects: number;
  /** Effects that never happened: final state not reached, missing charge, posting, event or delivery. */
  lostEffects: number;
  /** Unexpected answers or broken trials: not effects, but the scenario is not clean while any exist. */
  anomalies: string[];
  /** The largest time to recover over the trials, and what it measures in this scenario. */
  maxRecoveryMs: number | null;
  medianRecoveryMs: number | null;
  recoveryMeasure: string;
  /** Every duplicate and loss, by payment, so a failure points at the data. */
  findings: string[];
  notes: string[];
  figures: Record<string, unknown>;
  startedAt: string;
  durationMs: number;
}

/**
 * Collects what a scenario observed over its trials, writes it as a fragment for the table
 * (also when the scenario fails half way), and states the verdict the test asserts.
 */
export class ScenarioTally {
  private readonly started = Date.now();
  trials = 0;
  subjects = 0;
  duplicateEffects = 0;
  lostEffects = 0;
  readonly anomalies: string[] = [];
  readonly findings: string[] = [];
  readonly notes: string[] = [];
  readonly figures: Record<string, unknown> = {};
  private readonly recoveries: number[] = [];

  constructor(
    readonly id: string,
    readonly scenario: string,
    readonly recoveryMeasure: string,
    readonly subjectKind = 'payments',
  ) {}

  /**
   * Adds one judgement (census against its expected outcome); `asSubject: false` adds the
   * effects of something that is not itself a counted subject (e.g. a record's payment).
   */
  judged(judgement: Judgement, options: { asSubject?: boolean } = {}): void {
    if (options.asSubject !== false) this.subjects++;
    this.duplicateEffects += judgement.duplicates.reduce((n, d) => n + d.extra, 0);
    this.lostEffects += judgement.losses.length;
    for (const d of judgement.duplicates) this.findings.push(`DUPLICATE ${judgement.subject}: ${d.effect} x${d.extra + 1}`);
    for (const l of judgement.losses) this.findings.push(`LOST ${judgement.subject}: ${l}`);
    for (const a of judgement.anomalies) this.anomaly(`${judgement.subject}: ${a}`);
  }

  recovered(ms: number): void {
    this.recoveries.push(Math.round(ms));
  }

  anomaly(text: string): void {
    this.anomalies.push(text);
  }

  /** Counts a number observed per trial (e.g. redeliveries) under `name`. */
  add(name: string, value: number): void {
    this.figures[name] = ((this.figures[name] as number | undefined) ?? 0) + value;
  }

  /** Keeps a sample of a measured series (e.g. per-trial times). */
  sample(name: string, value: unknown): void {
    const list = ((this.figures[name] as unknown[] | undefined) ??= []);
    (list as unknown[]).push(value);
  }

  result(): ScenarioResult {
    const sorted = [...this.recoveries].sort((a, b) => a - b);
    return {
      id: this.id,
      scenario: this.scenario,
      trials: this.trials,
      subjects: this.subjects,
      subjectKind: this.subjectKind,
      duplicateEffects: this.duplicateEffects,
      lostEffects: this.lostEffects,
      anomalies: this.anomalies,
      maxRecoveryMs: sorted.length ? sorted[sorted.length - 1]! : null,
      medianRecoveryMs: sorted.length ? sorted[Math.floor((sorted.length - 1) / 2)]! : null,
      recoveryMeasure: this.recoveryMeasure,
      findings: this.findings,
      notes: this.notes,
      figures: this.figures,
      startedAt: new Date(this.started).toISOString(),
      durationMs: Date.now() - this.started,
    };
  }

  /** Writes the fragment that scripts/faults.ts turns into the table. */
  write(): ScenarioResult {
    const result = this.result();
    mkdirSync(RESULTS_DIR, { recursive: true });
    writeFileSync(path.join(RESULTS_DIR, `${this.id}.json`), JSON.stringify(result, null, 2));
    return result;
  }
}

/**
 * Runs `trials` trials, writes the figures whatever happens, and leaves the verdict to the
 * caller's assertions. A trial that throws is recorded as an anomaly and the next one runs
 * (three in a row end the scenario: the stack itself is broken then).
 */
export async function runTrials(tally: ScenarioTally, trials: number, trial: (index: number) => Promise<void>): Promise<ScenarioResult> {
  let brokenInARow = 0;
  try {
    for (let i = 0; i < trials; i++) {
      tally.trials++;
      const started = Date.now();
      try {
        await trial(i);
        tally.sample('trial took (ms)', Date.now() - started);
        brokenInARow = 0;
      } catch (error) {
        tally.anomaly(`trial ${i + 1} broke: ${(error as Error)?.stack ?? String(error)}`);
        if (++brokenInARow >= 3) {
          tally.anomaly('three trials in a row broke; scenario stopped');
          break;
        }
      }
    }
  } finally {
    tally.write();
  }
  return tally.result();
}

export function formatMs(ms: number | null): string {
  if (ms === null) return 'n/a';
  return ms < 10_000 ? `${(ms / 1000).toFixed(2)} s` : `${(ms / 1000).toFixed(1)} s`;
}

/** The table as Markdown: one row per scenario, and what each recovery time measures. */
export function renderMarkdown(results: ScenarioResult[], heading: string): string {
  const rows = [...results].sort((a, b) => a.id.localeCompare(b.id));
  const lines = [
    `# ${heading}`,
    '',
    '| scenario | trials | subjects | duplicate effects | lost effects | anomalies | max time to recover | median |',
    '|---|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map(
      (r) =>
        `| ${r.scenario} | ${r.trials} | ${r.subjects} ${r.subjectKind} | ${r.duplicateEffects} | ${r.lostEffects} | ${r.anomalies.length} | ${formatMs(r.maxRecoveryMs)} | ${formatMs(r.medianRecoveryMs)} |`,
    ),
    '',
    'Time to recover, per scenario:',
    '',
    ...rows.map((r) => `- **${r.scenario}**: ${r.recoveryMeasure}.`),
  ];
  const notes = rows.filter((r) => r.notes.length || r.findings.length || r.anomalies.length);
  if (notes.length) {
    lines.push('', 'Notes and findings:', '');
    for (const r of notes) {
      for (const n of r.notes) lines.push(`- ${r.scenario}: ${n}`);
      for (const f of r.findings.slice(0, 20)) lines.push(`- ${r.scenario}: ${f}`);
      for (const a of r.anomalies.slice(0, 10)) lines.push(`- ${r.scenario}: anomaly: ${a.split('\n')[0]}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

/** The same table for a terminal. */
export function renderText(results: ScenarioResult[]): string {
  const header = ['scenario', 'trials', 'subjects', 'dup', 'lost', 'anom', 'max recover', 'median'];
  const rows = [...results]
    .sort((a, b) => a.id.localeCompare(b.id))
    .map((r) => [r.scenario, String(r.trials), `${r.subjects}`, String(r.duplicateEffects), String(r.lostEffects), String(r.anomalies.length), formatMs(r.maxRecoveryMs), formatMs(r.medianRecoveryMs)]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}
