import type { Config, ProviderConnection } from '../lib/config';
import { SandboxProvider } from './sandbox-client';
import { StripeProvider } from './stripe';
import type { PaymentProvider } from './types';

/**
 * The deployment's PSP connections by name (PROVIDERS; issue 22). Payments, attempts, refunds,
 * webhooks and reconciliation runs record a provider by this name; the default is the first
 * configured one (payments from before routing, which record none, are at the default).
 */
export interface ProviderRegistry {
  readonly names: readonly string[];
  readonly defaultName: string;
  /** The named provider's client; throws UnknownProviderError for a name not configured. */
  get(name: string): PaymentProvider;
  has(name: string): boolean;
}

/** A provider name that this deployment does not configure (a removed PSP, or a typo). */
export class UnknownProviderError extends Error {
  override readonly name = 'UnknownProviderError';
  constructor(readonly provider: string, known: readonly string[]) {
    super(`provider "${provider}" is not configured (PROVIDERS: ${known.join(', ')})`);
  }
}

/** The configured names in order, the default first. */
export function configuredProviderNames(config: Pick<Config, 'PROVIDERS'>): string[] {
  return config.PROVIDERS.map((p) => p.name);
}

/** A registry over clients already made (tests, the dev stack): the first entry is the default unless named. */
export function providerRegistry(providers: Record<string, PaymentProvider> | [string, PaymentProvider][], defaultName?: string): ProviderRegistry {
  const entries = Array.isArray(providers) ? providers : Object.entries(providers);
  if (entries.length === 0) throw new Error('a provider registry needs at least one provider');
  const byName = new Map(entries);
  const names = entries.map(([name]) => name);
  const first = defaultName ?? names[0]!;
  if (!byName.has(first)) throw new UnknownProviderError(first, names);
  return {
    names,
    defaultName: first,
    has: (name) => byName.has(name),
    get(name) {
      const provider = byName.get(name);
      if (!provider) throw new UnknownProviderError(name, names);
      return provider;
    },
  };
}

/** One connection's client: Stripe for a `stripe…` name, the sandbox client otherwise. */
export function createProviderClient(connection: ProviderConnection, config: Pick<Config, 'STRIPE_API_KEY' | 'PROVIDER_TIMEOUT_MS'>): PaymentProvider {
  if (connection.kind === 'stripe') {
    const url = new URL(connection.url);
    const elsewhere = url.hostname !== 'api.stripe.com';
    return new StripeProvider({
      apiKey: config.STRIPE_API_KEY!,
      timeoutMs: config.PROVIDER_TIMEOUT_MS,
      webhookSecret: connection.webhookSecret,
      // A Stripe-compatible fake (stripe-mock in tests) at another address.
      ...(elsewhere ? { host: url.hostname, port: Number(url.port || (url.protocol === 'https:' ? 443 : 80)), protocol: url.protocol === 'https:' ? 'https' : 'http' } : {}),
    });
  }
  return new SandboxProvider({ baseUrl: connection.url, timeoutMs: config.PROVIDER_TIMEOUT_MS, webhookSecret: connection.webhookSecret });
}

/** The registry of the configured PSPs (lib/config.ts PROVIDERS), one client each. */
export function createProviderRegistry(config: Pick<Config, 'PROVIDERS' | 'STRIPE_API_KEY' | 'PROVIDER_TIMEOUT_MS'>): ProviderRegistry {
  return providerRegistry(config.PROVIDERS.map((c) => [c.name, createProviderClient(c, config)] as [string, PaymentProvider]));
}

/** Whether a value is a registry rather than one provider (callers that still pass one client). */
export function isProviderRegistry(value: PaymentProvider | ProviderRegistry): value is ProviderRegistry {
  return typeof (value as ProviderRegistry).get === 'function' && Array.isArray((value as ProviderRegistry).names);
}
