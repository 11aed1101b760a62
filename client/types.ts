import type { z } from 'zod';
import type {
  Balance,
  CapturePaymentBody,
  CreateCustomerBody,
  CreatePaymentBody,
  CreateRefundBody,
  Customer,
  DeliveryAttempt,
  Dispute,
  DisputeEvidenceBody,
  Event,
  EventDelivery,
  EventRecovery,
  ListDeliveryAttemptsQuery,
  ListDisputesQuery,
  ListEventsQuery,
  ListPaymentMethodsQuery,
  ListPaymentsQuery,
  ListRefundsQuery,
  Payment,
  PaymentMethod,
  Refund,
} from '../api/schemas';

/*
 * The client's types are the API's own zod schemas (the ones that validate requests and
 * generate the OpenAPI document), imported as types only: nothing of zod runs in the client.
 * Requests take the schemas' input side (defaults optional), responses their output side.
 */

export type Payment = z.output<typeof Payment>;
export type Refund = z.output<typeof Refund>;
export type Dispute = z.output<typeof Dispute>;
export type Customer = z.output<typeof Customer>;
export type PaymentMethod = z.output<typeof PaymentMethod>;
export type Event = z.output<typeof Event>;
export type EventType = Event['type'];
export type Balance = z.output<typeof Balance>;
export type DeliveryAttempt = z.output<typeof DeliveryAttempt>;
export type EventDelivery = z.output<typeof EventDelivery>;
export type EventRecovery = z.output<typeof EventRecovery>;

export type CreatePaymentParams = z.input<typeof CreatePaymentBody>;
export type CapturePaymentParams = z.input<typeof CapturePaymentBody>;
export type CreateRefundParams = z.input<typeof CreateRefundBody>;
export type CreateCustomerParams = z.input<typeof CreateCustomerBody>;
export type DisputeEvidenceParams = z.input<typeof DisputeEvidenceBody>;

/** Query parameters, all optional (the output side: `limit` is a number, not the string it travels as). */
type Query<T extends z.ZodType> = Partial<z.output<T>>;
export type ListPaymentsParams = Query<typeof ListPaymentsQuery>;
export type ListRefundsParams = Query<typeof ListRefundsQuery>;
export type ListPaymentMethodsParams = Query<typeof ListPaymentMethodsQuery>;
export type ListDisputesParams = Query<typeof ListDisputesQuery>;
export type ListEventsParams = Query<typeof ListEventsQuery>;
export type ListDeliveryAttemptsParams = Query<typeof ListDeliveryAttemptsQuery>;

export interface List<T> {
  object: 'list';
  data: T[];
  has_more: boolean;
}
