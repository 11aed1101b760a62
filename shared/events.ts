/**
 * The events the outbox records and delivers (docs/CONTRACT.md, webhooks): every area's, each
 * list defined once beside its area, and where a delivery stands.
 */
import { paymentEventTypes, paymentNoticeEventTypes, type PaymentEventType } from './payments';
import { refundEventTypes } from './refunds';
import { disputeEventTypes, type DisputeEventType } from './disputes';
import { paymentMethodEventTypes } from './customers';

export const eventTypes = [...paymentEventTypes, ...paymentNoticeEventTypes, ...refundEventTypes, ...disputeEventTypes, ...paymentMethodEventTypes] as [EventType, ...EventType[]];
export type EventType = PaymentEventType | (typeof paymentNoticeEventTypes)[number] | (typeof refundEventTypes)[number] | DisputeEventType | (typeof paymentMethodEventTypes)[number];

/** Where an event's webhook delivery stands: being tried, acknowledged, given up, or no endpoint. */
export const deliveryStatuses = ['pending', 'delivered', 'failed', 'skipped'] as const;
export type DeliveryStatus = (typeof deliveryStatuses)[number];
