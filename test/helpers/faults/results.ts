import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { RESULTS_DIR } from './config';
import type { Judgement } from './census';
import type { ScenarioResult } from '../../../devstack/fault-table';

export type { ScenarioResult };

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
