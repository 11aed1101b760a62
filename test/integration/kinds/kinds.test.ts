import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectLedgerConsistent } from '../../helpers/effects';
import { kindsUnderTest, startKinds, type KindsStack, type KindUnderTest, type RunningKind } from '../../helpers/kinds';
import { flows, flowsAt } from './flows';

/**
 * The integration flows (./flows.ts), written once, run at every kind of provider/kinds.ts
 * through the whole stack (API, payment workflow on a real worker, Temporal, PostgreSQL) against
 * the kind's PSP for tests (test/helpers/kinds.ts): the sandbox, Stripe's fake, the Adyen
 * double. A flow is registered at a kind only where the kind has what it needs; the first
 * describe holds that registration to the descriptors' capabilities and the kinds' test
 * payment methods.
 */

let running: KindsStack;
beforeAll(async () => {
  running = await startKinds();
}, 300_000);
afterAll(async () => running?.stop());

const kindNamed = (name: string): RunningKind => running.kinds.get(name)!;

/** What was registered, by kind: filled as the describes below are collected. */
const registered = new Map<string, string[]>();

describe('which flows run at which kind', () => {
  it('each kind runs exactly the flows its capabilities and test payment methods allow', () => {
    const all = flows.map((f) => f.name);
    const without = (...needs: string[]) => flows.filter((f) => !needs.includes(f.needs)).map((f) => f.name);
    expect(Object.fromEntries(registered)).toEqual({
      sandbox: all,
      'stripe-test': all,
      'adyen-test': all,
    });
    // Every kind is covered, and every flow runs somewhere.
    expect([...registered.keys()].sort()).toEqual(kindsUnderTest.map((k) => k.name).sort());
    for (const flow of flows) expect([...registered.values()].some((names) => names.includes(flow.name)), flow.name).toBe(true);
  });

  it('a flow that needs a capability or a test payment method is not registered at a kind without it', () => {
    const sandbox = kindsUnderTest.find((k) => k.kind === 'sandbox')!;
    const noSaving: KindUnderTest = { ...sandbox, capabilities: { ...sandbox.capabilities, savedMethods: false } };
    expect(flowsAt(noSaving).map((f) => f.needs)).not.toContain('savedMethods');
    expect(flowsAt(sandbox).map((f) => f.needs)).toContain('savedMethods');
    const cardsOnly: KindUnderTest = { ...sandbox, paymentMethods: ['pm_card_visa'] };
    expect(flowsAt(cardsOnly).map((f) => f.needs).sort()).toEqual(['pm_card_visa', 'pm_card_visa', 'pm_card_visa', 'pm_card_visa', 'pm_card_visa', 'pm_card_visa', 'savedMethods']);
    expect(flowsAt({ ...sandbox, paymentMethods: [] })).toEqual([]);
  });
});

for (const kind of kindsUnderTest) {
  describe(`${kind.name} (kind ${kind.kind})`, () => {
    const names: string[] = [];
    registered.set(kind.name, names);
    for (const flow of flowsAt(kind)) {
      names.push(flow.name);
      it(`${flow.name} [needs ${flow.needs}]`, async () => {
        await flow.run(kindNamed(kind.name), running.stack);
        await expectLedgerConsistent(running.stack.sql, kindNamed(kind.name).tenant.id);
      });
    }
  });
}
