import type { NetworkScript } from './network-attempts';
import { cardFingerprint } from './network';

/**
 * The deterministic test payment methods. Each names one behaviour of a real PSP that the
 * orchestrator must survive; anything else is refused as an invalid payment method.
 */
export type PaymentMethodBehaviour =
  | { kind: 'approve' }
  | { kind: 'decline'; code: string; message: string }
  /** Approves, after the configured delay. */
  | { kind: 'slow' }
  /** Commits the charge, then never answers: the lost-response case. */
  | { kind: 'lose_response' }
  /** The first N attempts of a key fail with 503 before anything is committed. */
  | { kind: 'flaky' }
  /** Charges fine; every refund of the charge fails (to exercise refund.failed). */
  | { kind: 'refunds_fail' }
  /**
   * 3-D Secure: requires_action with a challenge page; approved, it succeeds (or waits for
   * capture), unless `declineAfterApproval` (the issuer declines after authentication).
   * Off-session (the customer is not there to authenticate), a saved card's charge is exempt,
   * unless `everyPayment`: the issuer asks on every payment, and the charge is declined with
   * `authentication_required` (as card PSPs answer `off_session: true`).
   */
  | { kind: 'challenge'; declineAfterApproval: boolean; everyPayment: boolean }
  /** A bank debit: processing, then settled (succeeded, or declined with debit_failed) after SANDBOX_ASYNC_SETTLE_MS. */
  | { kind: 'async'; fails: boolean }
  /**
   * Charges fine; SANDBOX_DISPUTE_AFTER_MS after its capture the card network opens a dispute
   * for the whole captured amount (reason `fraudulent`): a chargeback (funds withdrawn) or an
   * inquiry (no money moves until it escalates).
   */
  | { kind: 'dispute'; stage: 'chargeback' | 'inquiry' }
  /**
   * Approves on-session (so it can be saved); off-session its issuer's answer lives in the card
   * network the sandboxes share (network-attempts.ts), the same at every sandbox.
   */
  | { kind: 'network'; script: NetworkScript };

const behaviours: Record<string, PaymentMethodBehaviour> = {
  // The plain cards: approved, unless the sandbox's approval rates say otherwise (approval-rates.ts).
  pm_card_visa: { kind: 'approve' },
  pm_card_mastercard: { kind: 'approve' },
  pm_card_declined: { kind: 'decline', code: 'card_declined', message: 'Your card was declined.' },
  pm_card_insufficient_funds: {
    kind: 'decline',
    code: 'insufficient_funds',
    message: 'Your card has insufficient funds.',
  },
  pm_card_slow: { kind: 'slow' },
  pm_card_timeout_after_charge: { kind: 'lose_response' },
  pm_card_flaky: { kind: 'flaky' },
  pm_card_refund_fails: { kind: 'refunds_fail' },
  pm_card_threeDSecureRequired: { kind: 'challenge', declineAfterApproval: false, everyPayment: false },
  pm_card_threeDSecureRequired_declined: { kind: 'challenge', declineAfterApproval: true, everyPayment: false },
  pm_card_authenticationRequired: { kind: 'challenge', declineAfterApproval: false, everyPayment: true },
  pm_sepa_debit: { kind: 'async', fails: false },
  pm_sepa_debit_fails: { kind: 'async', fails: true },
  pm_card_createDispute: { kind: 'dispute', stage: 'chargeback' },
  pm_card_createDisputeInquiry: { kind: 'dispute', stage: 'inquiry' },
  // Revenue recovery's cards (docs/recovery.md): saved on-session, then declined off-session by the network.
  pm_card_recoverAfter2: { kind: 'network', script: 'recoverAfter2' },
  pm_card_alwaysInsufficientFunds: { kind: 'network', script: 'alwaysInsufficientFunds' },
  pm_card_stolen: { kind: 'network', script: 'stolen' },
  pm_card_mastercard_adviceRetryLater: { kind: 'network', script: 'adviceRetryLater' },
  pm_card_mastercard_adviceNeverRetry: { kind: 'network', script: 'adviceNeverRetry' },
};

export const knownPaymentMethods = Object.keys(behaviours);

/**
 * The listed test payment method a name stands for: the name itself, or, for a variant
 * `<listed>__<variant>` (letters and digits), the listed one. A variant behaves as the listed
 * card but is another card (another number with the same last four digits): its own
 * fingerprint, its own account at the card network. Tests and the chaos run use one where a
 * story needs a card no other story charges.
 */
function listedOf(paymentMethod: string): string | null {
  if (Object.hasOwn(behaviours, paymentMethod)) return paymentMethod;
  const variant = /^(pm_[A-Za-z0-9_]+?)__[A-Za-z0-9]{1,40}$/.exec(paymentMethod);
  return variant && Object.hasOwn(behaviours, variant[1]!) ? variant[1]! : null;
}

export function paymentMethodBehaviour(paymentMethod: string): PaymentMethodBehaviour | undefined {
  const listed = listedOf(paymentMethod);
  return listed === null ? undefined : behaviours[listed];
}

/** The card behind a test payment method, as a card network knows it; null for a method that is no card (a bank debit). */
export interface TestCard {
  brand: string;
  last4: string;
  exp_month: number;
  exp_year: number;
  /** One per card (network.ts cardFingerprint): the same for every charge of the card, at every sandbox. */
  fingerprint: string;
}

/** The last four digits of each test card (the card networks' usual test numbers where there is one); a card not listed is a Visa 4242. */
const last4s: Record<string, string> = {
  pm_card_mastercard: '4444',
  pm_card_declined: '0002',
  pm_card_insufficient_funds: '9995',
  pm_card_threeDSecureRequired: '3220',
  pm_card_threeDSecureRequired_declined: '3063',
  pm_card_authenticationRequired: '3184',
  pm_card_recoverAfter2: '0341',
  pm_card_alwaysInsufficientFunds: '9995',
  pm_card_stolen: '9979',
  pm_card_mastercard_adviceRetryLater: '4444',
  pm_card_mastercard_adviceNeverRetry: '5100',
};

export function testCard(paymentMethod: string): TestCard | null {
  const listed = listedOf(paymentMethod);
  if (listed === null || behaviours[listed]!.kind === 'async') return null;
  return { brand: listed.startsWith('pm_card_mastercard') ? 'mastercard' : 'visa', last4: last4s[listed] ?? '4242', exp_month: 12, exp_year: 2034, fingerprint: cardFingerprint(paymentMethod) };
}

/**
 * What a charge without its customer (off_session) does with a card: an issuer that asks for
 * authentication on every payment declines it (nobody can answer a challenge); a saved card is
 * otherwise exempt from the challenge (a merchant-initiated transaction).
 */
export function offSessionBehaviour(behaviour: PaymentMethodBehaviour): PaymentMethodBehaviour {
  if (behaviour.kind !== 'challenge') return behaviour;
  if (behaviour.everyPayment) return { kind: 'decline', code: 'authentication_required', message: 'The card issuer requires authentication for this payment; bring the customer back to pay on-session.' };
  return behaviour.declineAfterApproval ? { kind: 'decline', code: 'card_declined', message: 'Your card was declined.' } : { kind: 'approve' };
}
