/**
 * The routing simulation's scenario, fixed before any strategy was tuned against it
 * (`npm run bench -- routing-sim`): three PSPs, their issuers' approval rates per card network and
 * currency, the traffic's mix of segments, and one PSP whose approvals for one segment fall from
 * 92 % to 60 % at the middle of the run. Every strategy of the harness meets the same payments:
 * the same segments in the same order and, for a given PSP, the same issuer's answer (both drawn
 * from the seed), so their regrets differ by their choices alone.
 */

/** A segment as the routing counts outcomes: card network, currency, payment method type. */
export interface SimSegment {
  network: 'visa' | 'mastercard';
  currency: 'EUR' | 'USD' | 'GBP';
  methodType: 'card';
}

export interface SimSegmentMix {
  segment: SimSegment;
  /** Its share of the payments (the shares add up to 1). */
  share: number;
  /** Each PSP's approval rate for it, before the change. */
  rates: Record<string, number>;
}

export interface SimChange {
  /** From this payment's index on (0-based, over the whole run). */
  atPayment: number;
  provider: string;
  segment: SimSegment;
  rate: number;
}

export interface SimScenario {
  providers: string[];
  payments: number;
  mix: SimSegmentMix[];
  change: SimChange;
}

const card = 'card' as const;

export const scenario: SimScenario = {
  providers: ['psp-a', 'psp-b', 'psp-c'],
  payments: 100_000,
  mix: [
    { segment: { network: 'visa', currency: 'EUR', methodType: card }, share: 0.3, rates: { 'psp-a': 0.92, 'psp-b': 0.86, 'psp-c': 0.8 } },
    { segment: { network: 'visa', currency: 'USD', methodType: card }, share: 0.2, rates: { 'psp-a': 0.85, 'psp-b': 0.9, 'psp-c': 0.83 } },
    { segment: { network: 'mastercard', currency: 'EUR', methodType: card }, share: 0.2, rates: { 'psp-a': 0.8, 'psp-b': 0.84, 'psp-c': 0.91 } },
    { segment: { network: 'mastercard', currency: 'USD', methodType: card }, share: 0.15, rates: { 'psp-a': 0.88, 'psp-b': 0.82, 'psp-c': 0.86 } },
    { segment: { network: 'visa', currency: 'GBP', methodType: card }, share: 0.1, rates: { 'psp-a': 0.87, 'psp-b': 0.89, 'psp-c': 0.9 } },
    { segment: { network: 'mastercard', currency: 'GBP', methodType: card }, share: 0.05, rates: { 'psp-a': 0.78, 'psp-b': 0.9, 'psp-c': 0.85 } },
  ],
  // At the middle: psp-a's approvals for Visa in EUR (its best segment, 30 % of the traffic) fall to 60 %.
  change: { atPayment: 50_000, provider: 'psp-a', segment: { network: 'visa', currency: 'EUR', methodType: card }, rate: 0.6 },
};

/** At least this many seeds, each a full run of `payments`. */
export const SIM_SEEDS = 10;
