/**
 * The fault table: one row per scenario, as the fault tests write it (test/helpers/faults/results.ts)
 * and `npm run faults` (scripts/faults.ts) renders it.
 */
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
