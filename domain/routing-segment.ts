import { paymentMethodFacts, type PaymentMethodRef } from './payment-methods';
import { segmentLevels, type RoutingSegment } from './routing-success-rate';

/**
 * The segment a payment's outcomes are counted in, and read from, by success-rate routing
 * (domain/routing-success-rate.ts): its card network, its currency and its payment method type.
 * Pure: the same payment always has the same segment, so a replayed decision reads the same counts.
 *
 * - network: a test payment method's own (domain/payment-methods.ts TEST_PAYMENT_METHODS), a
 *   saved card's brand (one of CARD_NETWORKS), else `unknown` (a bank debit, a PSP's token);
 * - currency: the payment's ISO 4217 code, upper case;
 * - method type: `card`, `sepa_debit`, else `unknown`.
 *
 * Its levels, finest first, are where an estimate falls back to while a finer one has too few
 * outcomes: network + currency + type (`visa:EUR:card`), network + type (`visa:*:card`), type
 * (`*:*:card`), then everything (`*:*:*`). The currency is given up first: an issuer's
 * approvals depend on its network more than on the currency a merchant charges in.
 */
export interface PaymentSegment {
  segment: RoutingSegment;
  /** The level keys, finest first (segmentLevels). */
  levels: string[];
}

/** What the segment is read from: the payment's currency and its method. */
export interface SegmentedPayment extends PaymentMethodRef {
  currency: string;
}

export function paymentSegment(payment: SegmentedPayment): PaymentSegment {
  const facts = paymentMethodFacts(payment);
  const segment: RoutingSegment = { network: facts.network, currency: payment.currency.toUpperCase(), methodType: facts.type };
  return { segment, levels: segmentLevels(segment) };
}
