import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient, startStack, uniqueKey, type TestStack } from '../helpers/stack';

let stack: TestStack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => stack?.stop());

describe('one payment end to end', () => {
  it('charges, records and replays', async () => {
    const tenant = await stack.createTenant();
    const api = apiClient(stack.apiUrl, tenant.apiKey);
    const key = uniqueKey();
    const body = { order_id: uniqueKey('ord'), amount_minor: 4999, currency: 'EUR', payment_method: 'pm_card_visa' };
    const first = await api.post('/v1/payments', body, key);
    console.log(first.status, first.text);
    expect(first.status).toBe(201);
    const again = await api.post('/v1/payments', body, key);
    expect(again.status).toBe(201);
    expect(again.text).toBe(first.text);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
  });
});
