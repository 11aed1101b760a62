import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { capabilityTable, testPaymentMethodTable } from '../../provider/registry';

describe('the capability × kind table', () => {
  it('docs/ARCHITECTURE.md shows what the descriptors say, every kind and every capability', () => {
    const page = readFileSync(path.join(import.meta.dirname, '..', '..', 'docs', 'ARCHITECTURE.md'), 'utf8');
    const shown = /<!-- capability-table -->\n([\s\S]*?)\n<!-- \/capability-table -->/.exec(page)?.[1];
    expect(shown, 'regenerate it with capabilityTable() (provider/registry.ts)').toBe(capabilityTable());
    expect(capabilityTable()).toContain('| `unknownOutcome` | `replay` | `lookup` | `lagging-lookup` |');
    expect(capabilityTable()).toContain('| `networkTransactionIds` | no | yes | no |');
    expect(capabilityTable()).toContain('| `savedMethods` | yes | yes | yes |');
  });

  it('docs/CONTRACT.md §2.1 shows each kind\'s test payment methods as its descriptor maps them', () => {
    const page = readFileSync(path.join(import.meta.dirname, '..', '..', 'docs', 'CONTRACT.md'), 'utf8');
    const shown = /<!-- test-payment-methods -->\n([\s\S]*?)\n<!-- \/test-payment-methods -->/.exec(page)?.[1];
    expect(shown, 'regenerate it with testPaymentMethodTable() (provider/registry.ts)').toBe(testPaymentMethodTable());
    expect(testPaymentMethodTable()).toContain('| `pm_card_declined` | `pm_card_chargeDeclined` |');
  });
});
