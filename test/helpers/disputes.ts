import { apiClient, type Tenant, type TestStack } from './stack';

/** The tenant's EUR balances by account (GET /v1/balance): what a dispute's postings moved. */
export async function eurBalances(stack: TestStack, tenant: Tenant): Promise<Record<string, number>> {
  const balance = await apiClient(stack.apiUrl, tenant.apiKey).get('/v1/balance');
  const accounts = (balance.json as { accounts: { account: string; currency: string; balance_minor: number }[] }).accounts;
  return Object.fromEntries(accounts.filter((a) => a.currency === 'EUR').map((a) => [a.account, a.balance_minor]));
}

/** The types of the tenant's events about one dispute, in the order they were written. */
export async function disputeEventTypes(stack: TestStack, tenant: Tenant, disputeId: string): Promise<string[]> {
  return (
    await stack.sql<{ type: string }[]>`
      SELECT type FROM outbox_events WHERE tenant_id = ${tenant.id} AND payload->'data'->'object'->>'id' = ${disputeId} ORDER BY seq`
  ).map((e) => e.type);
}
