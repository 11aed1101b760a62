/**
 * Our test payment methods (the sandbox's names, sandbox/payment-methods.ts) as Stripe's own test
 * PaymentMethods, each the card of Stripe's test mode that behaves as the sandbox's does. The
 * charge step sends the kind's token for one of these names (provider/registry.ts
 * testPaymentMethodAt); any other payment method, a production merchant's `pm_…` of its own
 * Stripe account included, goes to Stripe as given. A name missing here has no Stripe card
 * that behaves as the sandbox's: a lost answer, a slow or flaky PSP (the sandbox's faults), a
 * decline after 3-D Secure, a bank debit, and revenue recovery's cards (approved on-session,
 * declined off-session by a scripted issuer of the card network the sandboxes share; Stripe's
 * declining test cards decline on-session too, so they cannot be saved).
 */
export const stripeTestPaymentMethods: Readonly<Record<string, string>> = {
  pm_card_visa: 'pm_card_visa',
  pm_card_mastercard: 'pm_card_mastercard',
  pm_card_declined: 'pm_card_chargeDeclined',
  pm_card_insufficient_funds: 'pm_card_chargeDeclinedInsufficientFunds',
  pm_card_refund_fails: 'pm_card_refundFail',
  // A challenge on-session; once saved, charged off-session without one (the sandbox's exemption).
  pm_card_threeDSecureRequired: 'pm_card_authenticationRequiredOnSetup',
  // A challenge on every payment: off-session, declined authentication_required.
  pm_card_authenticationRequired: 'pm_card_authenticationRequired',
  pm_card_createDispute: 'pm_card_createDispute',
  pm_card_createDisputeInquiry: 'pm_card_createDisputeInquiry',
};
