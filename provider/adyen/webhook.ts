import type { Types } from '@adyen/api-library';
import { adyen } from './library';
import { ProviderWebhookError, type ProviderWebhookEvent } from '../types';
import { eventFromNotification } from './wire';

type NotificationRequestItem = Types.notification.NotificationRequestItem;

/**
 * Adyen's standard notifications: a batch (`{ live, notificationItems: [{ NotificationRequestItem }] }`)
 * whose every item carries its own HMAC signature (`additionalData.hmacSignature`, over the
 * item's fields, with the webhook's HMAC key). Each item is checked by the official library's
 * HmacValidator and read into our event; one bad item refuses the whole batch (Adyen sends it
 * again), so nothing of a forged batch is stored. The batch is answered `[accepted]`
 * (the kind's `notifications: 'batch'`).
 */
export function verifyAdyenNotifications(rawBody: string, options: { hmacKey: string | null }): ProviderWebhookEvent[] {
  if (!options.hmacKey) throw new ProviderWebhookError('no HMAC key is configured for this Adyen connection: its notifications are refused');
  let body: unknown;
  try {
    body = JSON.parse(rawBody);
  } catch {
    throw new ProviderWebhookError('the notification is not JSON');
  }
  const items = (body as { notificationItems?: unknown }).notificationItems;
  if (!Array.isArray(items) || items.length === 0) throw new ProviderWebhookError('the notification has no notificationItems');
  const validator = new adyen.hmacValidator();
  return items.map((wrapped, index) => {
    const item = (wrapped as { NotificationRequestItem?: NotificationRequestItem } | null)?.NotificationRequestItem;
    if (!item || typeof item !== 'object' || typeof item.pspReference !== 'string' || typeof item.eventCode !== 'string' || typeof item.amount !== 'object') {
      throw new ProviderWebhookError(`notificationItems[${index}] is not a NotificationRequestItem`);
    }
    const signature = item.additionalData?.hmacSignature;
    if (!signature) throw new ProviderWebhookError(`notificationItems[${index}] has no HMAC signature`);
    let valid: boolean;
    try {
      valid = validator.validateHMAC(item, options.hmacKey!);
    } catch {
      valid = false;
    }
    if (!valid) throw new ProviderWebhookError(`notificationItems[${index}] has a bad HMAC signature`);
    return eventFromNotification(item);
  });
}

/** Our one-event verifier (PaymentProvider.verifyWebhook) over a batch of one item; a batch of more is for verifyAdyenNotifications. */
export function verifyAdyenWebhook(rawBody: string, options: { hmacKey: string | null }): ProviderWebhookEvent {
  const events = verifyAdyenNotifications(rawBody, options);
  if (events.length !== 1) throw new ProviderWebhookError(`a batch of ${events.length} notifications needs the batch route`);
  return events[0]!;
}
