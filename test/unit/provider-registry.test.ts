import { describe, expect, it } from 'vitest';
import { loadConfig, providerWebhookSecretVariable } from '../../lib/config';
import * as kinds from '../../provider/kinds';
import { configuredProviderNames, createProviderRegistry, createProviderWebhookBatchVerifier, createProviderWebhookVerifier, kindSettingVariables, knownProviderKinds, providerRegistry, reconciledProviderNames, UnknownProviderError } from '../../provider/registry';
import { SandboxProvider } from '../../provider/sandbox/client';
import { adyen } from '../../provider/adyen/library';
import { signSandboxWebhook } from '../../provider/sandbox/webhook';
import { StripeProvider } from '../../provider/stripe/client';
import { ProviderWebhookError, type PaymentProvider } from '../../provider/types';

const sandboxSettings = (url: string, webhookSecret: string | null = null) => ({ url, webhookSecret });

/** PROVIDERS: several named PSP connections, each naming its kind, each with its own settings. */
describe('PROVIDERS', () => {
  it('without it, the one PSP of PROVIDER (its kind, also its name) at PROVIDER_URL; nothing set: the development sandbox', () => {
    expect(loadConfig({}).PROVIDERS).toEqual([{ name: 'sandbox', kind: 'sandbox', settings: sandboxSettings('http://127.0.0.1:4010') }]);
    expect(loadConfig({ PROVIDER: 'sandbox', PROVIDER_URL: 'http://127.0.0.1:5000', SANDBOX_WEBHOOK_SECRET: 's'.repeat(20) }).PROVIDERS).toEqual([
      { name: 'sandbox', kind: 'sandbox', settings: sandboxSettings('http://127.0.0.1:5000', 's'.repeat(20)) },
    ]);
    expect(loadConfig({ PROVIDER: 'stripe', STRIPE_API_KEY: 'sk_test_1', STRIPE_WEBHOOK_SECRET: 'whsec_1' }).PROVIDERS).toEqual([
      { name: 'stripe', kind: 'stripe', settings: { url: 'https://api.stripe.com', apiKey: 'sk_test_1', webhookSecret: 'whsec_1' } },
    ]);
  });

  it('names, kinds and URLs in order; each setting its own variable, else the kind’s shared one', () => {
    const config = loadConfig({
      PROVIDERS: 'sandbox-a=sandbox:http://127.0.0.1:4010, sandbox-b=sandbox:http://127.0.0.1:4011,stripe-eu=stripe',
      STRIPE_API_KEY: 'sk_test_shared',
      PROVIDER_STRIPE_EU_API_KEY: 'sk_test_eu',
      SANDBOX_WEBHOOK_SECRET: 'shared-sandbox-secret',
      PROVIDER_SANDBOX_B_WEBHOOK_SECRET: 'own-b-secret-0123',
      STRIPE_WEBHOOK_SECRET: 'whsec_1',
    });
    expect(config.PROVIDERS).toEqual([
      { name: 'sandbox-a', kind: 'sandbox', settings: sandboxSettings('http://127.0.0.1:4010', 'shared-sandbox-secret') },
      { name: 'sandbox-b', kind: 'sandbox', settings: sandboxSettings('http://127.0.0.1:4011', 'own-b-secret-0123') },
      // `name=kind` alone: the kind's default URL.
      { name: 'stripe-eu', kind: 'stripe', settings: { url: 'https://api.stripe.com', apiKey: 'sk_test_eu', webhookSecret: 'whsec_1' } },
    ]);
    expect(configuredProviderNames(config)).toEqual(['sandbox-a', 'sandbox-b', 'stripe-eu']);
    expect(reconciledProviderNames(config)).toEqual(['sandbox-a', 'sandbox-b', 'stripe-eu']);
    expect(providerWebhookSecretVariable('sandbox-b')).toBe('PROVIDER_SANDBOX_B_WEBHOOK_SECRET');
    expect(kindSettingVariables().sort()).toEqual([
      'ADYEN_API_KEY',
      'ADYEN_DISPUTES_URL',
      'ADYEN_HMAC_KEY',
      'ADYEN_MERCHANT_ACCOUNT',
      'ADYEN_REPORT_API_KEY',
      'ADYEN_REPORT_PASSWORD',
      'ADYEN_REPORT_URL',
      'ADYEN_REPORT_USERNAME',
      'SANDBOX_WEBHOOK_SECRET',
      'STRIPE_API_KEY',
      'STRIPE_WEBHOOK_SECRET',
    ]);
  });

  it('a kind this build does not list is refused, naming the PSP and the known kinds', () => {
    expect(knownProviderKinds).toEqual(['adyen', 'sandbox', 'stripe']);
    expect(() => loadConfig({ PROVIDERS: 'sandbox-a=sandbox:http://127.0.0.1:4010,worldpay=worldpay:https://try.access.worldpay.com' })).toThrow(
      'invalid configuration: PROVIDERS: provider "worldpay": unknown kind "worldpay" (known kinds: adyen, sandbox, stripe)',
    );
    expect(() => loadConfig({ PROVIDER: 'worldpay' })).toThrow('invalid configuration: PROVIDER: provider "worldpay": unknown kind "worldpay" (known kinds: adyen, sandbox, stripe)');
  });

  it('a PSP that names no kind is refused: no kind is guessed from its name or URL', () => {
    // The name is no kind: a `stripe…` name at a URL is not Stripe, any other name not a sandbox.
    for (const entry of ['adyen=https://checkout-test.adyen.com', 'stripe=https://api.stripe.com', 'sandbox-a=http://127.0.0.1:4010', 'sandbox-a=', 'sandbox-a=:http://127.0.0.1:4010']) {
      const name = entry.slice(0, entry.indexOf('='));
      expect(() => loadConfig({ PROVIDERS: entry, STRIPE_API_KEY: 'sk_test_1' }), entry).toThrow(
        `invalid configuration: PROVIDERS: provider "${name}": no kind given; write ${name}=<kind>:<url> (known kinds: adyen, sandbox, stripe)`,
      );
    }
    // The single form: a URL without PROVIDER names no kind either.
    expect(() => loadConfig({ PROVIDER_URL: 'https://checkout-test.adyen.com' })).toThrow(/^invalid configuration: PROVIDER: PROVIDER_URL is set but no kind/);
  });

  it('refuses bad names, repeated names, bad URLs, empty lists and settings the kind refuses, naming the PSP', () => {
    expect(() => loadConfig({ PROVIDERS: 'Sandbox=sandbox:http://127.0.0.1:4010' })).toThrow(/PROVIDERS: provider name "Sandbox"/);
    expect(() => loadConfig({ PROVIDERS: 'a_b=sandbox:http://127.0.0.1:4010' })).toThrow(/provider name "a_b"/);
    expect(() => loadConfig({ PROVIDERS: 'a=sandbox:http://127.0.0.1:4010,a=sandbox:http://127.0.0.1:4011' })).toThrow(/"a" is given twice/);
    expect(() => loadConfig({ PROVIDERS: 'a=sandbox:not a url' })).toThrow('provider "a" (sandbox): URL "not a url" must be an http(s) URL');
    expect(() => loadConfig({ PROVIDERS: 'a=sandbox:ftp://127.0.0.1' })).toThrow('provider "a" (sandbox): URL "ftp://127.0.0.1" must be an http(s) URL');
    expect(() => loadConfig({ PROVIDERS: 'sandbox-a' })).toThrow(/"sandbox-a" is not name=kind:url/);
    expect(() => loadConfig({ PROVIDERS: ' , ' })).toThrow(/names no provider/);
    expect(() => loadConfig({ PROVIDERS: 'stripe-eu=stripe' })).toThrow('provider "stripe-eu" (stripe): apiKey (PROVIDER_STRIPE_EU_API_KEY or STRIPE_API_KEY) is required');
    expect(() => loadConfig({ PROVIDERS: 'a=sandbox', PROVIDER_A_WEBHOOK_SECRET: 'short' })).toThrow(
      'provider "a" (sandbox): webhookSecret (PROVIDER_A_WEBHOOK_SECRET or SANDBOX_WEBHOOK_SECRET) must be 16+ characters',
    );
  });
});

describe('the kinds (provider/kinds.ts)', () => {
  it('each kind is listed once, under its own name', () => {
    const listed = Object.entries(kinds);
    expect(listed.map(([exported, kind]) => [exported, kind.kind])).toEqual(listed.map(([exported]) => [exported, exported]));
  });

  it('the registry: one client per name, made by the connection’s kind, the first the default', async () => {
    const registry = await createProviderRegistry(
      loadConfig({ PROVIDERS: 'sandbox-a=sandbox:http://127.0.0.1:4010,eu=stripe:http://127.0.0.1:12111', STRIPE_API_KEY: 'sk_test_1' }),
    );
    expect(registry.names).toEqual(['sandbox-a', 'eu']);
    expect(registry.defaultName).toBe('sandbox-a');
    expect(registry.get('sandbox-a')).toBeInstanceOf(SandboxProvider);
    expect(registry.get('eu')).toBeInstanceOf(StripeProvider);
    expect(registry.has('sandbox-b')).toBe(false);
    expect(() => registry.get('sandbox-b')).toThrow(UnknownProviderError);
  });

  it('each connection’s webhooks are verified by its kind with its own secret', async () => {
    const [a, b] = loadConfig({ PROVIDERS: 'a=sandbox:http://127.0.0.1:4010,b=sandbox:http://127.0.0.1:4011', PROVIDER_A_WEBHOOK_SECRET: 'secret-of-a-0123456' }).PROVIDERS;
    const body = JSON.stringify({ id: 'evt_1', type: 'charge.succeeded', created: Math.floor(Date.now() / 1000), data: { object: { object: 'balance' } } });
    const headers = { 'Sandbox-Signature': signSandboxWebhook(body, 'secret-of-a-0123456') };
    expect((await createProviderWebhookVerifier(a!))(body, headers)).toMatchObject({ id: 'evt_1', type: 'charge.succeeded' });
    // b has no secret: every webhook of b is refused.
    const verifyB = await createProviderWebhookVerifier(b!);
    expect(() => verifyB(body, headers)).toThrow(ProviderWebhookError);
  });

  it('a kind whose notifications come in batches gets a batch verifier with its own HMAC key (by its capability); one event per request gets none', async () => {
    const hmacKey = 'AB'.repeat(32);
    const [sandbox, adyenTest] = loadConfig({
      PROVIDERS: 'sandbox=sandbox:http://127.0.0.1:4010,adyen-test=adyen:http://127.0.0.1:4012',
      ADYEN_API_KEY: 'test_key',
      ADYEN_MERCHANT_ACCOUNT: 'OrchestratorTest',
      PROVIDER_ADYEN_TEST_HMAC_KEY: hmacKey,
    }).PROVIDERS;
    expect(adyenTest!.settings.disputesUrl).toBe('https://ca-test.adyen.com/ca/services/DisputeService');
    const [doubled] = loadConfig({ PROVIDERS: 'adyen-test=adyen:http://127.0.0.1:4012', ADYEN_API_KEY: 'k', ADYEN_MERCHANT_ACCOUNT: 'm', PROVIDER_ADYEN_TEST_DISPUTES_URL: 'http://127.0.0.1:4012/ca/services/DisputeService' }).PROVIDERS;
    expect(doubled!.settings.disputesUrl).toBe('http://127.0.0.1:4012/ca/services/DisputeService');
    expect(await createProviderWebhookBatchVerifier(sandbox!)).toBeNull();
    const verify = (await createProviderWebhookBatchVerifier(adyenTest!))!;
    const item = { amount: { currency: 'EUR', value: 100 }, eventCode: 'REPORT_AVAILABLE', eventDate: new Date().toISOString(), merchantAccountCode: 'OrchestratorTest', merchantReference: 'r', pspReference: 'PSP1', success: 'true' };
    const batch = (key: string) => JSON.stringify({ live: 'false', notificationItems: [{ NotificationRequestItem: { ...item, additionalData: { hmacSignature: new adyen.hmacValidator().calculateHmac(item as never, key) } } }] });
    expect(verify(batch(hmacKey), {}).map((n) => n.event.id)).toEqual(['PSP1:REPORT_AVAILABLE:true']);
    expect(() => verify(batch('CD'.repeat(32)), {})).toThrow(ProviderWebhookError);
  });

  it('an adyen connection is reconciled from its settlement reports: Adyen’s test report host unless told, the report user from its own variables, else the kind’s', () => {
    const config = loadConfig({
      PROVIDERS: 'sandbox=sandbox:http://127.0.0.1:4010,adyen-eu=adyen,adyen-test=adyen:http://127.0.0.1:4012',
      ADYEN_API_KEY: 'test_key',
      ADYEN_MERCHANT_ACCOUNT: 'OrchestratorTest',
      ADYEN_REPORT_USERNAME: 'report@Company.Shared',
      ADYEN_REPORT_PASSWORD: 'shared-password',
      PROVIDER_ADYEN_TEST_REPORT_URL: 'http://127.0.0.1:4012',
      PROVIDER_ADYEN_TEST_REPORT_API_KEY: 'report-key',
    });
    expect(config.PROVIDERS.map((p) => p.settings)).toEqual([
      expect.anything(),
      expect.objectContaining({ reportUrl: 'https://ca-test.adyen.com', reportUsername: 'report@Company.Shared', reportPassword: 'shared-password', reportApiKey: null }),
      expect.objectContaining({ reportUrl: 'http://127.0.0.1:4012', reportUsername: 'report@Company.Shared', reportApiKey: 'report-key' }),
    ]);
    expect(reconciledProviderNames(config)).toEqual(['sandbox', 'adyen-eu', 'adyen-test']);
    expect(() => loadConfig({ PROVIDERS: 'adyen=adyen', ADYEN_API_KEY: 'k', ADYEN_MERCHANT_ACCOUNT: 'm', ADYEN_REPORT_URL: 'ftp://reports' })).toThrow(/reportUrl \(PROVIDER_ADYEN_REPORT_URL or ADYEN_REPORT_URL\) must be an http\(s\) URL/);
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
