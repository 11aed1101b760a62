import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { capabilityTable, testPaymentMethodTable } from '../../provider/registry';
import { updateDocTables, withTable } from '../../scripts/docs-tables';

const page = (name: string) => readFileSync(path.join(import.meta.dirname, '..', '..', 'docs', name), 'utf8');
const shownIn = (text: string, marker: string) => new RegExp(`<!-- ${marker} -->\\n([\\s\\S]*?)\\n<!-- /${marker} -->`).exec(text)?.[1];

describe('the capability × kind table', () => {
  it('docs/ARCHITECTURE.md shows what the descriptors say, every kind and every capability', () => {
    expect(shownIn(page('ARCHITECTURE.md'), 'capability-table'), 'regenerate it: npm run docs:capabilities').toBe(capabilityTable());
    expect(capabilityTable()).toContain('| `unknownOutcome` | `replay` | `lookup` | `lagging-lookup` |');
    expect(capabilityTable()).toContain('| `networkTransactionIds` | no | yes | no |');
    expect(capabilityTable()).toContain('| `savedMethods` | yes | yes | yes |');
  });

  it('docs/CONTRACT.md §2.1 shows each kind\'s test payment methods as its descriptor maps them', () => {
    expect(shownIn(page('CONTRACT.md'), 'test-payment-methods'), 'regenerate it: npm run docs:capabilities').toBe(testPaymentMethodTable());
    expect(testPaymentMethodTable()).toContain('| `pm_card_declined` | `pm_card_chargeDeclined` |');
  });

  it('npm run docs:capabilities --check finds nothing to write; a table that differs is replaced between its markers, and only there', () => {
    expect(updateDocTables({ check: true })).toEqual([]);
    const stale = 'before\n<!-- capability-table -->\n| old |\n<!-- /capability-table -->\nafter';
    expect(withTable(stale, 'capability-table', '| new |')).toBe('before\n<!-- capability-table -->\n| new |\n<!-- /capability-table -->\nafter');
    expect(() => withTable('no markers', 'capability-table', '| new |')).toThrow(/markers/);
  });
});
