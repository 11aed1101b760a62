import type { Types } from '@adyen/api-library';
import { adyen } from './library';
import { ProviderWebhookError, type ProviderWebhookEvent } from '../types';
import { eventFromNotification, readNotificationBatch } from './wire';

type NotificationRequestItem = Types.notification.NotificationRequestItem;

/** One verified item of a batch: our event, and the item as Adyen sent it (what is stored). */
export interface AdyenNotification {
  event: ProviderWebhookEvent;
  payload: NotificationRequestItem;
}

/**
 * Adyen's standard notifications: a batch (`{ live, notificationItems: [{ NotificationRequestItem }] }`)
 * whose every item carries its own HMAC signature (`additionalData.hmacSignature`: HMAC-SHA256,
 * base64, with the webhook's hex key, over the item's pspReference, originalReference,
 * merchantAccountCode, merchantReference, amount value and currency, eventCode and success).
 * Adyen signs fields, not bytes, so each item is first read by the wire schema (a field it
 * cannot read: ProviderEventUnreadableError with the field's path), then its signature checked by
 * the official library's HmacValidator (a missing or bad one: ProviderWebhookError). One bad
 * item refuses the whole batch (Adyen sends it again), so nothing of a forged or unreadable batch
 * is stored. The batch is answered `[accepted]` (the kind's `notifications: 'batch'`).
 */
export function verifyAdyenNotificationBatch(rawBody: string, options: { hmacKey: string | null }): AdyenNotification[] {
  if (!options.hmacKey) throw new ProviderWebhookError('no HMAC key is configured for this Adyen connection: its notifications are refused');
  let body: unknown;
  try {
    body = JSON.parse(rawBody);
  } catch {
    throw new ProviderWebhookError('the notification is not JSON');
  }
  const items = readNotificationBatch(body);
  const validator = new adyen.hmacValidator();
  return items.map((item, index) => {
    const signature = item.additionalData?.hmacSignature;
    if (typeof signature !== 'string' || signature === '') throw new ProviderWebhookError(`notificationItems[${index}] has no HMAC signature (additionalData.hmacSignature)`);
    let valid: boolean;
    try {
      valid = validator.validateHMAC(item, options.hmacKey!);
    } catch {
      valid = false;
    }
    if (!valid) throw new ProviderWebhookError(`notificationItems[${index}] has a bad HMAC signature`);
    return { event: eventFromNotification(item), payload: item };
  });
}

/** The batch's events (verifyAdyenNotificationBatch). */
export function verifyAdyenNotifications(rawBody: string, options: { hmacKey: string | null }): ProviderWebhookEvent[] {
  return verifyAdyenNotificationBatch(rawBody, options).map((n) => n.event);
}

/** Our one-event verifier (PaymentProvider.verifyWebhook) over a batch of one item; a batch of more is for verifyAdyenNotificationBatch. */
export function verifyAdyenWebhook(rawBody: string, options: { hmacKey: string | null }): ProviderWebhookEvent {
  const events = verifyAdyenNotifications(rawBody, options);
  if (events.length !== 1) throw new ProviderWebhookError(`a batch of ${events.length} notifications needs the batch route`);
  return events[0]!;
}
