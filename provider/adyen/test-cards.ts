/**
 * Adyen's own test cards, by the names our test payment methods have at every kind
 * (sandbox/payment-methods.ts). The card number goes in Adyen's unencrypted test form
 * (`test_<number>`, accepted by Adyen's test environment in place of the encrypted field); a
 * refusal is asked for by the holder name, as Adyen's test environment reads it.
 * `CAPTURE_FAILED`, `REFUND_FAILED` and `CANCEL_FAILED` are the Adyen double's own holder names:
 * its capture (refund, cancel) of such a card is confirmed as failed (Adyen's test environment has
 * no card for it); `AUTHORISATION_PENDING` is answered `Received`, authorised later
 * (doubles/adyen/pending.ts).
 * `CHARGEBACK` is the double's own holder name too: its captured payment is disputed
 * (NOTIFICATION_OF_CHARGEBACK, then CHARGEBACK; doubles/adyen/disputes.ts), as the sandbox's
 * `pm_card_createDispute` is (Adyen's test environment opens disputes from its Customer Area).
 */
export const adyenTestCards: Readonly<Record<string, { number: string; holderName: string }>> = {
  pm_card_visa: { number: '4111111111111111', holderName: 'Test Shopper' },
  pm_card_mastercard: { number: '5555341244441115', holderName: 'Test Shopper' },
  pm_card_declined: { number: '4111111111111111', holderName: 'DECLINED' },
  pm_card_chargeDeclinedInsufficientFunds: { number: '4111111111111111', holderName: 'NOT_ENOUGH_BALANCE' },
  pm_card_captureFailed: { number: '4111111111111111', holderName: 'CAPTURE_FAILED' },
  pm_card_refundFailed: { number: '4111111111111111', holderName: 'REFUND_FAILED' },
  pm_card_createDispute: { number: '4111111111111111', holderName: 'CHARGEBACK' },
  // Adyen's 3-D Secure 2 test card: the shopper is redirected to the issuer's challenge. Refused
  // after the shopper approved it when the holder name asks for a refusal.
  pm_card_threeDSecureRequired: { number: '4917610000000000', holderName: 'Test Shopper' },
  pm_card_threeDSecureRequired_declined: { number: '4917610000000000', holderName: 'DECLINED' },
  pm_card_cancelFailed: { number: '4111111111111111', holderName: 'CANCEL_FAILED' },
  pm_card_authorisationPending: { number: '4111111111111111', holderName: 'AUTHORISATION_PENDING' },
};

/** The card numbers of adyenTestCards whose on-session payments Adyen (and its double) redirect to a 3-D Secure challenge. */
export const adyenThreeDSecureCards: readonly string[] = ['4917610000000000'];
