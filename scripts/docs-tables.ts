/**
 * `npm run docs:capabilities`: writes the tables generated from the kinds' descriptors into the
 * docs, between their markers: the capability × kind table of docs/ARCHITECTURE.md
 * (capabilityTable()) and the test payment method × kind table of docs/CONTRACT.md §2.1
 * (testPaymentMethodTable()). `--check` writes nothing and exits 1 naming each page that differs
 * (test/unit/capability-table.test.ts holds the pages to the descriptors the same way).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { capabilityTable, testPaymentMethodTable } from '../provider/registry';

const root = path.resolve(import.meta.dirname, '..');

/** Each generated table: its page, its marker, and what the descriptors say. */
export const generatedTables = [
  { page: 'docs/ARCHITECTURE.md', marker: 'capability-table', table: capabilityTable },
  { page: 'docs/CONTRACT.md', marker: 'test-payment-methods', table: testPaymentMethodTable },
] as const;

/** The page with the table between its markers replaced by `table`; throws if the markers are missing. */
export function withTable(page: string, marker: string, table: string): string {
  const pattern = new RegExp(`(<!-- ${marker} -->\\n)[\\s\\S]*?(\\n<!-- /${marker} -->)`);
  if (!pattern.test(page)) throw new Error(`no <!-- ${marker} --> … <!-- /${marker} --> markers`);
  return page.replace(pattern, (_, open: string, close: string) => `${open}${table}${close}`);
}

/** The pages whose generated tables differ from the descriptors (written unless `check`). */
export function updateDocTables(options: { check: boolean }): string[] {
  const stale: string[] = [];
  for (const { page, marker, table } of generatedTables) {
    const file = path.join(root, page);
    const text = readFileSync(file, 'utf8');
    const updated = withTable(text, marker, table());
    if (updated === text) continue;
    stale.push(`${page} (${marker})`);
    if (!options.check) writeFileSync(file, updated);
  }
  return stale;
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  const check = process.argv.includes('--check');
  const stale = updateDocTables({ check });
  if (check && stale.length > 0) {
    console.error(`generated tables differ from the descriptors: ${stale.join(', ')}; run npm run docs:capabilities`);
    process.exit(1);
  }
  console.log(stale.length === 0 ? 'the generated tables match the descriptors' : `updated: ${stale.join(', ')}`);
}
