/**
 * A customer's saved payment methods as the API, the worker and the workflows share them. Free of
 * Node, I/O and clocks (workflow code imports it).
 */

/** A customer's saved payment method was saved (a payment with setup_future_usage succeeded) or detached. */
export const paymentMethodEventTypes = ['payment_method.attached', 'payment_method.detached'] as const;
/** A card as a saved payment method shows it: nothing more of the card is kept. */
export interface CardDetails {
  brand: string;
  last4: string;
  expMonth: number;
  expYear: number;
}

/**
 * What charging a saved payment method needs at any PSP: the token a PSP saved the card as
 * (by provider name) where it has one; elsewhere, the card network's transaction id of the
 * card's first payment and the card's details (a merchant-initiated transaction).
 */
export interface SavedMethodCharge {
  /** Our id (pm_…). */
  id: string;
  tokens: Record<string, string>;
  networkTransactionId: string;
  card: CardDetails;
}
