import type { Types } from '@adyen/api-library';
import { adyen } from '../../provider/adyen/library';
import { noWebhookFaults, type WebhookFaults } from '../../sandbox/deps';

type NotificationRequestItem = Types.notification.NotificationRequestItem;

/** One notification the double made, and what became of it (the sandbox's event states). */
export interface KeptNotification {
  item: NotificationRequestItem;
  /** `pending`: not yet answered `[accepted]`; `lost`: the loss fault kept it back (redeliver sends it). */
  state: 'pending' | 'delivered' | 'lost';
  attempts: number;
}

/** The payment a notification is about: a modification's original reference, else its own. */
export const paymentOf = (item: NotificationRequestItem) => item.originalReference ?? item.pspReference;

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|localhost|\[::1\])$/;

/**
 * The double's notifications, sent as Adyen sends them: each signed (HMAC-SHA256 by the official
 * library's HmacValidator) and posted as a batch (`{ live: "false", notificationItems: [...] }`) to
 * the webhook URL (loopback only), again with a growing pause until it is answered `[accepted]`.
 * The sandbox's webhook faults apply (POST /_sandbox/webhook_faults, the same body): `loss` keeps
 * a notification back (only a redelivery sends it), `duplicate` sends it twice, `delay_ms` holds
 * its first send, `reorder` holds it until a later notification of the same payment was
 * delivered (or `reorder_hold_ms` passed).
 */
export class NotificationOutbox {
  readonly kept: KeptNotification[] = [];
  faults: WebhookFaults = { ...noWebhookFaults };
  private readonly validator = new adyen.hmacValidator();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly held = new Map<KeptNotification, () => void>();
  private closed = false;

  private url: string | null = null;

  constructor(private readonly options: { hmacKey: string; webhookUrl: string | null; random?: () => number }) {
    this.webhookUrl = options.webhookUrl;
  }

  get webhookUrl(): string | null {
    return this.url;
  }

  /** Where the notifications go from now on (loopback only); null: kept, not sent. */
  set webhookUrl(webhookUrl: string | null) {
    if (webhookUrl !== null) {
      const url = new URL(webhookUrl);
      if (!/^https?:$/.test(url.protocol) || !LOOPBACK.test(url.hostname)) throw new Error(`the Adyen double sends notifications to loopback only, not ${webhookUrl}`);
    }
    this.url = webhookUrl;
  }

  /** Signs the item, keeps it and sends it (unless the loss fault keeps it back). */
  add(item: NotificationRequestItem): void {
    item.additionalData = { ...item.additionalData, hmacSignature: this.validator.calculateHmac(item, this.options.hmacKey) };
    const random = this.options.random ?? Math.random;
    const kept: KeptNotification = { item, state: 'pending', attempts: 0 };
    this.kept.push(kept);
    if (!this.url) return;
    if (random() < this.faults.loss) {
      kept.state = 'lost';
      return;
    }
    const copies = random() < this.faults.duplicate ? 2 : 1;
    const go = () => {
      for (let copy = 0; copy < copies; copy++) this.send(kept);
    };
    const release = () => this.later(this.faults.delayMs, go);
    if (random() < this.faults.reorder) {
      // Released by the next delivery of its payment, or at the end of its hold.
      this.held.set(kept, release);
      this.later(this.faults.reorderHoldMs, () => this.release(kept));
    } else {
      release();
    }
  }

  /** Sends the notifications of a payment (or with that PSP reference) again, now; how many. */
  redeliver(pspReference: string): number {
    const found = this.kept.filter((k) => k.item.pspReference === pspReference || paymentOf(k.item) === pspReference);
    for (const kept of found) {
      if (kept.state === 'lost') kept.state = 'pending';
      this.held.delete(kept);
      this.send(kept);
    }
    return found.length;
  }

  close(): void {
    this.closed = true;
    for (const timer of this.timers) clearTimeout(timer);
  }

  private release(kept: KeptNotification): void {
    const release = this.held.get(kept);
    if (!release) return;
    this.held.delete(kept);
    release();
  }

  private later(ms: number, run: () => void): void {
    if (this.closed) return;
    const timer = setTimeout(() => (this.timers.delete(timer), run()), ms);
    this.timers.add(timer);
  }

  /** One batch of the one item, until it is answered `[accepted]` (or the double closes). */
  private send(kept: KeptNotification): void {
    const webhookUrl = this.url;
    if (this.closed || !webhookUrl) return;
    kept.attempts += 1;
    const body = JSON.stringify({ live: 'false', notificationItems: [{ NotificationRequestItem: kept.item }] });
    fetch(webhookUrl, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body, signal: AbortSignal.timeout(5000) })
      .then(async (response) => {
        if (!(response.ok && (await response.text()).trim() === '[accepted]')) throw new Error(`answered ${response.status}`);
        kept.state = 'delivered';
        // A later notification of the same payment delivered: those held back before it follow.
        for (const held of [...this.held.keys()]) if (paymentOf(held.item) === paymentOf(kept.item) && this.kept.indexOf(held) < this.kept.indexOf(kept)) this.release(held);
      })
      .catch(() => this.later(Math.min(250 * kept.attempts, 5000), () => this.send(kept)));
  }
}
