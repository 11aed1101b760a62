/** Identifiers derived from our own records. Pure string functions: workflows use them too. */

/**
 * Provider idempotency keys, derived from our own records (payment or refund + step), never
 * from the client's string and never random: a restarted worker rebuilds the same key, and
 * the provider deduplicates our retries.
 */
export const providerSubKey = {
  /**
   * The charge of attempt n (each PSP attempt its own key). Attempt 1's key is `<payment>:charge`,
   * the key of a payment's only charge without routing, so runs without attempts and their
   * lookups match.
   */
  charge: (paymentId: string, attempt = 1) => (attempt <= 1 ? `${paymentId}:charge` : `${paymentId}:charge:${attempt}`),
  capture: (paymentId: string) => `${paymentId}:capture`,
  void: (paymentId: string) => `${paymentId}:void`,
  /** The details call of a customer back from a challenge: one per distinct result the customer brought (its SHA-256, hex). */
  challengeReturn: (paymentId: string, resultHash: string) => `${paymentId}:challenge-return:${resultHash.slice(0, 32)}`,
  /** The compensating refund when a captured payment cannot complete. */
  compensation: (paymentId: string) => `${paymentId}:compensation`,
  refund: (refundId: string) => `${refundId}:refund`,
  /**
   * The reconciler's refund (or void) of a charge found at a PSP that does not hold the payment
   * (a charge at A for a payment that succeeded at B), one per such charge.
   */
  duplicate: (paymentId: string, chargeId: string) => `${paymentId}:duplicate:${chargeId}`,
  /** Evidence staged or submitted for a dispute: one PSP call per distinct request (its fingerprint). */
  disputeEvidence: (disputeId: string, fingerprint: string) => `${disputeId}:evidence:${fingerprint.slice(0, 40)}`,
  /** The merchant's concession of a dispute: one per dispute, whoever asks. */
  disputeAccept: (disputeId: string) => `${disputeId}:accept`,
  /** The evidence submitted on the merchant's behalf for a payment already refunded. */
  disputeRefundEvidence: (disputeId: string) => `${disputeId}:refund-evidence`,
};

/** The business events that may each be recorded once, in the ledger and in the outbox. */
/** The dispute money facts the ledger posts, each once per dispute (activities/disputes.ts). */
export type DisputeMoneyFact = 'withdrawal' | 'reinstatement' | 'second_withdrawal' | 'loss';

export const businessEventKey = {
  paymentCapture: (paymentId: string) => `payment:${paymentId}:capture`,
  paymentEvent: (paymentId: string, type: string) => `payment:${paymentId}:${type}`,
  refund: (refundId: string) => `refund:${refundId}`,
  refundEvent: (refundId: string, type: string) => `refund:${refundId}:${type}`,
  /** A dispute's money: 'withdrawal', 'reinstatement', 'second_withdrawal' (a won chargeback taken again), 'loss'. */
  disputeMoney: (disputeId: string, fact: DisputeMoneyFact) => `dispute:${disputeId}:${fact}`,
  /** A dispute's event; `detail` tells apart facts of one type (a reminder's hours, an update's status). */
  disputeEvent: (disputeId: string, type: string, detail = '') => `dispute:${disputeId}:${type}${detail ? `:${detail}` : ''}`,
  paymentMethodEvent: (paymentMethodId: string, type: string) => `payment_method:${paymentMethodId}:${type}`,
};
