import { expect } from 'vitest';
import { startWebhookReceiver, type Delivery } from '../../helpers/webhook-receiver';
import type { Tenant, TestStack } from '../../helpers/stack';

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

/** A new tenant whose webhook_url is the merchant's endpoint. */
export async function tenantWithMerchant(stack: TestStack, merchant: Merchant, name = 'faults'): Promise<Tenant> {
  const tenant = await stack.createTenant(name);
  const response = await fetch(`${stack.apiUrl}/admin/tenants/${tenant.id}`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${stack.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ webhook_url: merchant.url }),
  });
  expect(response.status).toBe(200);
  return tenant;
}
