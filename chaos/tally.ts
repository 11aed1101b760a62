/** Passed/failed per check, by the check's name. */
export type CheckCounts = Record<string, { passed: number; failed: number }>;

/** Records each check's outcome: `verdict(name, ok, finding, into)` (the finding also goes to `into`, a payment's own list). */
export function createTally() {
  const checks: CheckCounts = {};
  const findings: string[] = [];
  const verdict = (name: string, ok: boolean, finding: () => string, into?: string[]) => {
    const tally = (checks[name] ??= { passed: 0, failed: 0 });
    if (ok) tally.passed++;
    else {
      tally.failed++;
      const text = `${name}: ${finding()}`;
      findings.push(text);
      into?.push(text);
    }
  };
  return { checks, findings, verdict };
}
export type VerdictFn = ReturnType<typeof createTally>['verdict'];
