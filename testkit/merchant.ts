import { startWebhookReceiver, type Delivery } from './webhook-receiver';

export type MerchantMode = 'up' | 'hang';

/**
 * A merchant's webhook endpoint that counts what it acknowledged, per event id (the
 * receiver's dedupe key), and that a scenario can make hang (accept requests, never
 * answer), go down (connection refused) and come back at the same URL.
 */
export interface Merchant {
  readonly url: string;
  /** 2xx answers given, per webhook-id. */
  readonly acks: Map<string, number>;
  /** Requests received while hanging, per webhook-id. */
  readonly hung: Map<string, number>;
  readonly deliveries: () => Delivery[];
  mode: MerchantMode;
  readonly isDown: boolean;
  down(): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
}

export async function startMerchant(initial: MerchantMode = 'up'): Promise<Merchant> {
  const acks = new Map<string, number>();
  const hung = new Map<string, number>();
  const all: Delivery[] = [];
  let mode = initial;
  const respond = (delivery: Delivery): number | 'hang' => {
    all.push(delivery);
    const id = String(delivery.headers['webhook-id']);
    if (mode === 'hang') {
      hung.set(id, (hung.get(id) ?? 0) + 1);
      return 'hang';
    }
    acks.set(id, (acks.get(id) ?? 0) + 1);
    return 200;
  };
  let receiver: Awaited<ReturnType<typeof startWebhookReceiver>> | null = await startWebhookReceiver(respond);
  const url = receiver.url;
  const port = Number(new URL(url).port);
  const down = async () => {
    const closing = receiver;
    receiver = null;
    await closing?.close();
  };
  return {
    url,
    acks,
    hung,
    deliveries: () => all,
    get mode() {
      return mode;
    },
    set mode(next: MerchantMode) {
      mode = next;
    },
    get isDown() {
      return receiver === null;
    },
    down,
    async up() {
      mode = 'up';
      receiver ??= await startWebhookReceiver(respond, { port });
    },
    close: down,
  };
}

/**
 * Points a tenant's webhooks at `url` through the admin API (PATCH /admin/tenants/:id);
 * throws with the API's answer when it is refused.
 */
export async function setTenantWebhookUrl(apiUrl: string, adminToken: string, tenantId: string, url: string): Promise<void> {
  const response = await fetch(`${apiUrl}/admin/tenants/${tenantId}`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ webhook_url: url }),
  });
  if (response.status !== 200) throw new Error(`webhook_url ${url} refused for tenant ${tenantId}: ${response.status} ${await response.text()}`);
}
