/**
 * The lengths Adyen documents for its identifiers: a pspReference (and an originalReference,
 * another item's pspReference) is 16 characters, a merchant reference at most 80. Its wire
 * schema bounds them (./wire.ts); its declaration tells people (./index.ts webhookBody). No SDK here.
 */
export const ADYEN_PSP_REFERENCE_LENGTH = 16;
export const ADYEN_MERCHANT_REFERENCE_MAX_LENGTH = 80;
