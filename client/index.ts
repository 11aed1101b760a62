import { Transport, type ClientOptions, type RequestOptions } from './http';
import type {
  Balance,
  CapturePaymentParams,
  CreateCustomerParams,
  CreatePaymentParams,
  CreateRefundParams,
  Customer,
  DeliveryAttempt,
  Dispute,
  DisputeEvidenceParams,
  Event,
  EventDelivery,
  EventRecovery,
  List,
  ListDeliveryAttemptsParams,
  ListDisputesParams,
  ListEventsParams,
  ListPaymentMethodsParams,
  ListPaymentsParams,
  ListRefundsParams,
  Payment,
  PaymentMethod,
  Refund,
} from './types';

export * from './errors';
export * from './types';
export { verifyWebhook, WebhookVerificationError, type WebhookHeaders } from './webhooks';
export { backoffMs, retryAfterMs, type ClientOptions, type RequestOptions } from './http';

const path = (template: string, id: string) => template.replace('{id}', encodeURIComponent(id));

/**
 * The payment orchestrator's API, typed. Every mutating call is one operation with one
 * Idempotency-Key (yours via `{ idempotencyKey }`, or a new UUID), reused on each automatic
 * retry, so a retry after a lost answer returns the first outcome instead of paying twice.
 */
export class PaymentsClient {
  private readonly http: Transport;

  constructor(options: ClientOptions) {
    this.http = new Transport(options);
  }

  readonly payments = {
    create: (params: CreatePaymentParams, options?: RequestOptions) => this.http.post<Payment>('/v1/payments', params, options),
    retrieve: (id: string) => this.http.get<Payment>(path('/v1/payments/{id}', id)),
    list: (params: ListPaymentsParams = {}) => this.http.get<List<Payment>>('/v1/payments', params),
    /** Every payment matching `params`, newest first, fetched page by page as you iterate. */
    listAll: (params: Omit<ListPaymentsParams, 'starting_after' | 'ending_before'> = {}) => this.http.paginate<Payment>('/v1/payments', params),
    capture: (id: string, params: CapturePaymentParams = {}, options?: RequestOptions) => this.http.post<Payment>(path('/v1/payments/{id}/capture', id), params, options),
    cancel: (id: string, options?: RequestOptions) => this.http.post<Payment>(path('/v1/payments/{id}/cancel', id), {}, options),
  };

  readonly refunds = {
    create: (paymentId: string, params: CreateRefundParams, options?: RequestOptions) => this.http.post<Refund>(path('/v1/payments/{id}/refunds', paymentId), params, options),
    retrieve: (id: string) => this.http.get<Refund>(path('/v1/refunds/{id}', id)),
    list: (paymentId: string, params: ListRefundsParams = {}) => this.http.get<List<Refund>>(path('/v1/payments/{id}/refunds', paymentId), params),
    listAll: (paymentId: string, params: Omit<ListRefundsParams, 'starting_after' | 'ending_before'> = {}) => this.http.paginate<Refund>(path('/v1/payments/{id}/refunds', paymentId), params),
  };

  /** Customers and the cards saved for them (docs/CONTRACT.md §3.9). */
  readonly customers = {
    create: (params: CreateCustomerParams = {}, options?: RequestOptions) => this.http.post<Customer>('/v1/customers', params, options),
    retrieve: (id: string) => this.http.get<Customer>(path('/v1/customers/{id}', id)),
    /** The customer's attached payment methods, newest first. */
    listPaymentMethods: (id: string, params: ListPaymentMethodsParams = {}) => this.http.get<List<PaymentMethod>>(path('/v1/customers/{id}/payment_methods', id), params),
    listAllPaymentMethods: (id: string, params: Omit<ListPaymentMethodsParams, 'starting_after' | 'ending_before'> = {}) =>
      this.http.paginate<PaymentMethod>(path('/v1/customers/{id}/payment_methods', id), params),
  };

  readonly paymentMethods = {
    /** Detaches a saved method: no new payment can charge it (one already under way may still be charged). */
    detach: (id: string, options?: RequestOptions) => this.http.post<PaymentMethod>(path('/v1/payment_methods/{id}/detach', id), {}, options),
  };

  readonly disputes = {
    retrieve: (id: string) => this.http.get<Dispute>(path('/v1/disputes/{id}', id)),
    list: (params: ListDisputesParams = {}) => this.http.get<List<Dispute>>('/v1/disputes', params),
    listAll: (params: Omit<ListDisputesParams, 'starting_after' | 'ending_before'> = {}) => this.http.paginate<Dispute>('/v1/disputes', params),
    /** Stages evidence, or submits it (`submit: true`) for the network's decision. */
    submitEvidence: (id: string, params: DisputeEvidenceParams, options?: RequestOptions) => this.http.post<Dispute>(path('/v1/disputes/{id}/evidence', id), params, options),
    /** Concedes the dispute (it is lost). */
    accept: (id: string, options?: RequestOptions) => this.http.post<Dispute>(path('/v1/disputes/{id}/accept', id), {}, options),
  };

  readonly balance = {
    retrieve: () => this.http.get<Balance>('/v1/balance'),
  };

  readonly events = {
    retrieve: (id: string) => this.http.get<Event>(path('/v1/events/{id}', id)),
    list: (params: ListEventsParams = {}) => this.http.get<List<Event>>('/v1/events', params),
    listAll: (params: Omit<ListEventsParams, 'starting_after' | 'ending_before'> = {}) => this.http.paginate<Event>('/v1/events', params),
    /** The delivery attempts of one event, newest first. */
    deliveries: (id: string, params: ListDeliveryAttemptsParams = {}) => this.http.get<List<DeliveryAttempt>>(path('/v1/events/{id}/deliveries', id), params),
    /** One new delivery of the event (same id, same body) per operation. */
    resend: (id: string, options?: RequestOptions) => this.http.post<EventDelivery>(path('/v1/events/{id}/resend', id), {}, options),
    /** Resends every event not acknowledged since `since`. */
    recover: (since: Date | string, options?: RequestOptions) =>
      this.http.post<EventRecovery>('/v1/webhook_endpoint/recover', { since: since instanceof Date ? since.toISOString() : since }, options),
  };
}
