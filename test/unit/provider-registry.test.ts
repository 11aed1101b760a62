import { describe, expect, it } from 'vitest';
import { loadConfig, providerWebhookSecretVariable } from '../../lib/config';
import { configuredProviderNames, createProviderRegistry, providerRegistry, UnknownProviderError } from '../../provider/registry';
import { SandboxProvider } from '../../provider/sandbox-client';
import { StripeProvider } from '../../provider/stripe';
import type { PaymentProvider } from '../../provider/types';

/** PROVIDERS (issue 22): several named PSP connections, each with its own webhook secret. */
describe('PROVIDERS', () => {
  it('without it, one provider named by PROVIDER, as before', () => {
    expect(loadConfig({}).PROVIDERS).toEqual([{ name: 'sandbox', kind: 'sandbox', url: 'http://127.0.0.1:4010', webhookSecret: null }]);
    expect(loadConfig({ PROVIDER_URL: 'http://127.0.0.1:5000', SANDBOX_WEBHOOK_SECRET: 's'.repeat(20) }).PROVIDERS).toEqual([
      { name: 'sandbox', kind: 'sandbox', url: 'http://127.0.0.1:5000', webhookSecret: 's'.repeat(20) },
    ]);
    expect(loadConfig({ PROVIDER: 'stripe', STRIPE_API_KEY: 'sk_test_1', STRIPE_WEBHOOK_SECRET: 'whsec_1' }).PROVIDERS).toEqual([
      { name: 'stripe', kind: 'stripe', url: 'https://api.stripe.com', webhookSecret: 'whsec_1' },
    ]);
  });

  it('names, URLs and kinds in order; each secret its own variable, else the kind’s shared one', () => {
    const config = loadConfig({
      PROVIDERS: 'sandbox-a=http://127.0.0.1:4010, sandbox-b=http://127.0.0.1:4011,stripe=https://api.stripe.com',
      STRIPE_API_KEY: 'sk_test_1',
      SANDBOX_WEBHOOK_SECRET: 'shared-sandbox-secret',
      PROVIDER_SANDBOX_B_WEBHOOK_SECRET: 'own-b-secret',
      STRIPE_WEBHOOK_SECRET: 'whsec_1',
    });
    expect(config.PROVIDERS).toEqual([
      { name: 'sandbox-a', kind: 'sandbox', url: 'http://127.0.0.1:4010', webhookSecret: 'shared-sandbox-secret' },
      { name: 'sandbox-b', kind: 'sandbox', url: 'http://127.0.0.1:4011', webhookSecret: 'own-b-secret' },
      { name: 'stripe', kind: 'stripe', url: 'https://api.stripe.com', webhookSecret: 'whsec_1' },
    ]);
    expect(configuredProviderNames(config)).toEqual(['sandbox-a', 'sandbox-b', 'stripe']);
    expect(providerWebhookSecretVariable('sandbox-b')).toBe('PROVIDER_SANDBOX_B_WEBHOOK_SECRET');
  });

  it('refuses bad names, repeated names, bad URLs, empty lists and Stripe without its key', () => {
    expect(() => loadConfig({ PROVIDERS: 'Sandbox=http://127.0.0.1:4010' })).toThrow(/PROVIDERS: provider name "Sandbox"/);
    expect(() => loadConfig({ PROVIDERS: 'a_b=http://127.0.0.1:4010' })).toThrow(/provider name "a_b"/);
    expect(() => loadConfig({ PROVIDERS: 'a=http://127.0.0.1:4010,a=http://127.0.0.1:4011' })).toThrow(/"a" is given twice/);
    expect(() => loadConfig({ PROVIDERS: 'a=not a url' })).toThrow(/not a URL/);
    expect(() => loadConfig({ PROVIDERS: 'a=ftp://127.0.0.1' })).toThrow(/not an http\(s\) URL/);
    expect(() => loadConfig({ PROVIDERS: 'sandbox-a' })).toThrow(/not name=url/);
    expect(() => loadConfig({ PROVIDERS: ' , ' })).toThrow(/names no provider/);
    expect(() => loadConfig({ PROVIDERS: 'stripe-eu=https://api.stripe.com' })).toThrow(/STRIPE_API_KEY is required/);
  });

  it('the registry: one client per name (Stripe for stripe…, the sandbox client otherwise), the first the default', () => {
    const registry = createProviderRegistry(loadConfig({ PROVIDERS: 'sandbox-a=http://127.0.0.1:4010,stripe-eu=http://127.0.0.1:12111', STRIPE_API_KEY: 'sk_test_1' }));
    expect(registry.names).toEqual(['sandbox-a', 'stripe-eu']);
    expect(registry.defaultName).toBe('sandbox-a');
    expect(registry.get('sandbox-a')).toBeInstanceOf(SandboxProvider);
    expect(registry.get('stripe-eu')).toBeInstanceOf(StripeProvider);
    expect(registry.has('sandbox-b')).toBe(false);
    expect(() => registry.get('sandbox-b')).toThrow(UnknownProviderError);
  });

  it('a registry over clients already made: the first, or the named one, is the default', () => {
    const a = {} as PaymentProvider;
    const b = {} as PaymentProvider;
    expect(providerRegistry({ a, b }).defaultName).toBe('a');
    expect(providerRegistry({ a, b }, 'b').defaultName).toBe('b');
    expect(providerRegistry({ a, b }).get('b')).toBe(b);
    expect(() => providerRegistry({})).toThrow(/at least one/);
    expect(() => providerRegistry({ a }, 'c')).toThrow(UnknownProviderError);
  });
});
