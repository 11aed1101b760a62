import { describe, expect, it } from 'vitest';
import path from 'node:path';
import { readFileSync } from 'node:fs';
import ts from 'typescript';
import { cancelPayment, capturePayment, createPayment } from '../../api/routes/payments';
import { createRefund } from '../../api/routes/refunds';
import { recoverRoute, resendRoute } from '../../api/routes/events';
import { operationName } from '../../api/typed-route';

const casesPath = path.resolve('test/static/typed-routes.cases.ts');

let previous: ts.Program | undefined;

/** The compiler's diagnostics for the cases file with this text, under the project's tsconfig (the second run reuses the first's work). */
function diagnostics(text: string): { line: number; message: string }[] {
  const config = ts.getParsedCommandLineOfConfigFile(path.resolve('tsconfig.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} });
  if (!config) throw new Error('tsconfig.json did not parse');
  const host = ts.createCompilerHost(config.options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (fileName, language, ...rest) =>
    path.resolve(fileName) === casesPath ? ts.createSourceFile(fileName, text, language) : getSourceFile(fileName, language, ...rest);
  const program = ts.createProgram({ rootNames: [casesPath], options: config.options, host, oldProgram: previous });
  previous = program;
  return ts
    .getPreEmitDiagnostics(program)
    .filter((d) => d.file && path.resolve(d.file.fileName) === casesPath)
    .map((d) => ({ line: d.file!.getLineAndCharacterOfPosition(d.start ?? 0).line, message: ts.flattenDiagnosticMessageText(d.messageText, ' ') }));
}

describe('handlers are typed from their route definitions (api/typed-route.ts)', () => {
  const source = readFileSync(casesPath, 'utf8');
  const lines = source.split('\n');
  /** Each case: its name and the lines of the statement that follows its directive (up to the next blank line). */
  const cases = lines.flatMap((text, index) => {
    const name = /@ts-expect-error case ([a-z-]+):/.exec(text)?.[1];
    if (!name) return [];
    let end = index + 1;
    while (end < lines.length && lines[end]!.trim() !== '') end++;
    return [{ name, from: index + 1, to: end - 1 }];
  });

  it('lists its cases', () => {
    expect(cases.map((c) => c.name)).toEqual(['wrong-status', 'wrong-shape', 'undeclared-error', 'other-route', 'pending-shape', 'final-shape', 'final-status']);
  });

  it('compiles the declared responses, and every refused case is refused (no unused @ts-expect-error)', () => {
    expect(diagnostics(source)).toEqual([]);
  }, 400_000);

  it('refuses each case for itself: without the directives, each case fails and nothing else does', () => {
    const stripped = source.replaceAll('// @ts-expect-error case', '// case');
    const found = diagnostics(stripped);
    for (const c of cases) {
      expect(found.filter((d) => d.line >= c.from && d.line <= c.to), `case ${c.name} compiled`).not.toEqual([]);
    }
    const outside = found.filter((d) => !cases.some((c) => d.line >= c.from && d.line <= c.to));
    expect(outside).toEqual([]);
  }, 400_000);
});

describe('operation names are derived from the route (they scope idempotency keys)', () => {
  it('are the names every stored record already carries', () => {
    // A change here would make a retry after an upgrade miss its stored outcome: these strings are in idempotency_records.
    expect([createPayment, capturePayment, cancelPayment, createRefund, resendRoute, recoverRoute].map(operationName)).toEqual([
      'POST /v1/payments',
      'POST /v1/payments/{id}/capture',
      'POST /v1/payments/{id}/cancel',
      'POST /v1/payments/{id}/refunds',
      'POST /v1/events/{id}/resend',
      'POST /v1/webhook_endpoint/recover',
    ]);
  });
});
