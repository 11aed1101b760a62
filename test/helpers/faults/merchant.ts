import { setTenantWebhookUrl, type Merchant } from '../../../testkit/merchant';
import type { Tenant, TestStack } from '../stack';

/** A new tenant of the test stack whose webhook_url is the merchant's endpoint. */
export async function tenantWithMerchant(stack: TestStack, merchant: Merchant, name = 'faults'): Promise<Tenant> {
  const tenant = await stack.createTenant(name);
  await setTenantWebhookUrl(stack.apiUrl, stack.adminToken, tenant.id, merchant.url);
  return tenant;
}
