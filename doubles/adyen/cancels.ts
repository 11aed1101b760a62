/** What the Adyen double's cancel (its CANCELLATION notification) comes to, for a payment it holds. */
interface CancelledPayment {
  holderName: string;
  authorised: boolean;
  capturedMinor: number;
}

/** The holder name whose cancels the double refuses after receiving them (Adyen's test environment has no such card). */
export const CANCEL_FAILED_HOLDER = 'CANCEL_FAILED';

/**
 * A cancel succeeds only for an authorisation nothing was captured of (and not cancelled
 * before), and never for the card held by CANCEL_FAILED: its CANCELLATION is not a success.
 */
export function cancelable(payment: CancelledPayment): boolean {
  return payment.holderName !== CANCEL_FAILED_HOLDER && payment.authorised && payment.capturedMinor === 0;
}

/** The reason a refused CANCELLATION gives. */
export function cancelRefusal(payment: CancelledPayment): string {
  if (payment.holderName === CANCEL_FAILED_HOLDER) return 'Cancel refused by the acquirer';
  return payment.capturedMinor > 0 ? 'Payment already captured' : 'Payment is not authorised';
}
