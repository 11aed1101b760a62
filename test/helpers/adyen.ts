import { randomBytes } from 'node:crypto';
import { startAdyenDouble, type AdyenDouble } from '../../doubles/adyen/server';
import { AdyenProvider } from '../../provider/adyen/client';
import type { StackOptions } from '../../devstack/stack';
import { apiClient, startStack, type TestStack } from './stack';

/** The settings a test's Adyen double and its `adyen-test` client share. */
export const adyenTestSettings = {
  hmacKey: '44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056',
  merchantAccount: 'OrchestratorTest',
  apiKey: 'test_api_key',
} as const;

/** A fresh pspReference as Adyen writes one: 16 characters (upper-case hex here, as the double's). */
export const adyenPspReference = () => randomBytes(8).toString('hex').toUpperCase();

/** An Adyen double on loopback, sending no notifications until its webhook URL is set. */
export function startTestAdyenDouble(): Promise<AdyenDouble> {
  return startAdyenDouble({ ...adyenTestSettings, webhookUrl: null });
}

/** The adyen kind's client against a double at `url` (a short timeout: a lost answer is found out fast). */
export function testAdyenClient(url: string): AdyenProvider {
  return new AdyenProvider({ baseUrl: url, ...adyenTestSettings, timeoutMs: 1500 });
}

/**
 * The test stack with an Adyen double as `adyen-test` (besides `options.extraProviders`), its
 * notifications sent to the stack's webhook route; `stop` closes both.
 */
export async function startAdyenStack(options: Partial<StackOptions> = {}): Promise<{ double: AdyenDouble; stack: TestStack; stop: () => Promise<void> }> {
  const double = await startTestAdyenDouble();
  const stack = await startStack({ ...options, extraProviders: { ...options.extraProviders, 'adyen-test': testAdyenClient(double.url) } });
  double.setWebhookUrl(`${stack.apiUrl}/provider_webhooks/adyen-test`);
  return { double, stack, stop: async () => (await stack.stop(), await double.close()) };
}

/** The Adyen stack with every payment routed to `adyen-test`, and a tenant with its API client. */
export async function startAdyenTenant(tenantName: string, api: StackOptions['api']) {
  const started = await startAdyenStack({ route: async () => ({ providers: ['adyen-test'], reason: 'test route: adyen-test' }), api });
  const tenant = await started.stack.createTenant(tenantName);
  return { ...started, tenant, api: apiClient(started.stack.apiUrl, tenant.apiKey) };
}
