/** What the route's plan of a payment across PSPs is given (workflow code imports it: no I/O). */
import type { PaymentWorkflowInput } from './payments';

/** What routing may look at: the input of the route's plan in the first charge attempt (activities/routing.ts, planRouteFor by default). */
export interface RouteRequest {
  paymentId: string;
  tenantId: string;
  amountMinor: number;
  currency: string;
  paymentMethod: string;
  /**
   * The payment's input: the first attempt persists the intent again if a start in doubt left
   * the run without it (db/payments.ts ensureIntent).
   */
  intent: PaymentWorkflowInput;
}
