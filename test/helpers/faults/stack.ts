import type { StackOptions } from '../../../devstack/stack';
import { startMerchant, type Merchant } from '../../../testkit/merchant';
import { apiClient, startStack, type Tenant, type TestStack } from '../stack';
import { tenantWithMerchant } from './merchant';
import type { Api } from './payments';

/**
 * What a fault scenario runs against: the product (the test stack, with `options`), the
 * merchant's webhook endpoint, a tenant whose webhooks go to it, and an API client of that
 * tenant. `stop()` takes it down in the reverse order, the processes a scenario started
 * beside it first (`alsoStop`, newest first): each file starts one in beforeAll and stops it
 * in afterAll.
 */
export interface FaultStack {
  stack: TestStack;
  merchant: Merchant;
  tenant: Tenant;
  api: Api;
  /** Stops `close` with the rest, before the stack. */
  alsoStop(close: () => Promise<unknown>): void;
  stop(): Promise<void>;
}

export async function startFaultStack(name: string, options: Partial<StackOptions> = {}): Promise<FaultStack> {
  const closers: (() => Promise<unknown>)[] = [];
  const stop = async () => {
    for (let close = closers.pop(); close; close = closers.pop()) await close();
  };
  try {
    const stack = await startStack(options);
    closers.push(() => stack.stop());
    const merchant = await startMerchant();
    closers.push(() => merchant.close());
    const tenant = await tenantWithMerchant(stack, merchant, name);
    return { stack, merchant, tenant, api: apiClient(stack.apiUrl, tenant.apiKey), alsoStop: (close) => void closers.push(close), stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
