import { hasTestPaymentMethodShape, paymentMethodFacts, type PaymentMethodRef } from '../domain/payment-methods';
import type { PaymentMethodSupport, ProviderCapabilities, ProviderDouble, ProviderKind, ProviderWebhookBatchVerifier, ProviderWebhookVerifier } from './kind';
import * as kinds from './kinds';
import type { PaymentProvider } from './types';

/**
 * The deployment's PSP connections by name (PROVIDERS). Payments, attempts, refunds, webhooks
 * and reconciliation runs record a provider by this name; the default is the first configured
 * one (a payment that records none is at the default).
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

/** One named PSP connection (an entry of PROVIDERS, or the single PROVIDER when it is unset). */
export interface ProviderConnection {
  /** Lowercase [a-z0-9-]: what payments, attempts, webhooks' paths and reconciliation runs record. */
  name: string;
  /** Its kind (provider/kinds.ts), as the entry names it. */
  kind: string;
  /** Its kind's settings as the kind's schema parsed them: the PSP's base URL, and what else the kind needs (secrets, keys). */
  settings: { url: string } & Record<string, unknown>;
}

/** The kinds by name, from provider/kinds.ts. */
const kindsByName: ReadonlyMap<string, ProviderKind> = new Map(Object.values(kinds).map((kind) => [kind.kind, kind]));

/** The names of the kinds this build knows, sorted. */
export const knownProviderKinds: readonly string[] = [...kindsByName.keys()].sort();

/** A kind by its name; throws for one this build does not know. */
export function providerKind(kind: string): ProviderKind {
  const found = kindsByName.get(kind);
  if (!found) throw new Error(`unknown kind "${kind}" (known kinds: ${knownProviderKinds.join(', ')})`);
  return found;
}

/**
 * The kinds whose capabilities hold `holds`, as people read them (`` `a`, `b` ``; `none`): the
 * API's texts name the kinds a behaviour applies to from their declarations, never by hand.
 */
export function kindsWhere(holds: (capabilities: ProviderCapabilities) => boolean): string {
  return knownProviderKinds.filter((kind) => holds(providerKind(kind).capabilities)).map((kind) => `\`${kind}\``).join(', ') || 'none';
}

/** The kinds that declare a double of their PSP (ProviderKind.double), by kind, sorted: what PSP_DOUBLES may name. */
export const providerDoubles: ReadonlyMap<string, ProviderDouble> = new Map(
  knownProviderKinds.flatMap((kind) => {
    const double = providerKind(kind).double;
    return double ? [[kind, double] as const] : [];
  }),
);

/** What a client without a kind (a test's fake) is taken to be: a PSP whose lookup proves, whose modifications are final, that charges any saved card it is given. */
const kindlessCapabilities: ProviderCapabilities = { balanceReport: false, chargeSearch: true, unknownOutcome: 'lookup', modifications: 'final', notifications: 'event', savedMethods: true, networkTransactionIds: true, challengeReturn: 'merchant', disputeSource: 'retrieval' };

/** The capabilities of a client's kind: what the steps read, never the kind's name. */
export function capabilitiesOf(provider: PaymentProvider): ProviderCapabilities {
  return provider.kind === undefined ? kindlessCapabilities : providerKind(provider.kind).capabilities;
}

/**
 * Whether a PSP of this kind (its name, or its descriptor) can charge the payment's method, by
 * its declaration (ProviderKind.paymentMethods):
 * - a saved method of ours is a card: supported where the kind charges cards (whether this PSP
 *   can charge that saved card, by its token or the network's id, is chargesSavedCard's question);
 * - a test payment method is supported where the kind has it (`all`: every one of ours,
 *   TEST_PAYMENT_METHODS, variants included; a list: those names exactly), and only where its
 *   type is one the kind charges;
 * - any other name of a test method's shape (`pm_card_…`, `pm_sepa_…`) is an unknown test
 *   method: unsupported;
 * - anything else is a token of some PSP: supported where the kind takes tokens as given.
 * Pure: a declaration read, no I/O.
 */
export function supportsMethod(kind: string | Pick<ProviderKind, 'paymentMethods'>, method: string | PaymentMethodRef): boolean {
  const support: PaymentMethodSupport = (typeof kind === 'string' ? providerKind(kind) : kind).paymentMethods;
  const ref = typeof method === 'string' ? { paymentMethod: method } : method;
  const facts = paymentMethodFacts(ref);
  if (ref.savedCard) return support.types.includes('card');
  // A variant (`pm_card_visa__ab12`) is the sandbox's reading of a name: a kind with a list of names has only those.
  const hasIt = support.testMethods === 'all' ? facts.testMethod !== null : support.testMethods.includes(ref.paymentMethod);
  if (hasIt) return facts.type === 'unknown' || support.types.includes(facts.type);
  if (facts.testMethod !== null || hasTestPaymentMethodShape(ref.paymentMethod)) return false;
  return support.pspTokens;
}

/**
 * The payment method a charge at this client sends: the kind's own test instrument for one of
 * our test payment methods (its descriptor's testPaymentMethods), else the method as given.
 */
export function testPaymentMethodAt(provider: PaymentProvider, paymentMethod: string): string {
  const table = provider.kind === undefined ? undefined : providerKind(provider.kind).testPaymentMethods;
  return table && Object.hasOwn(table, paymentMethod) ? table[paymentMethod]! : paymentMethod;
}

/**
 * The test payment method × kind table of docs/CONTRACT.md §2.1, generated from the descriptors
 * (test/unit/capability-table.test.ts holds the page to it): for each kind with a table, what
 * it is sent for each of our names it maps (— for one it has no instrument for).
 */
export function testPaymentMethodTable(): string {
  const kinds = knownProviderKinds.map(providerKind).filter((k) => k.testPaymentMethods !== undefined);
  const names = [...new Set(kinds.flatMap((k) => Object.keys(k.testPaymentMethods!)))].sort();
  return [
    `| our test payment method | ${kinds.map((k) => `\`${k.kind}\``).join(' | ')} |`,
    `|---|${kinds.map(() => '---|').join('')}`,
    ...names.map((name) => `| \`${name}\` | ${kinds.map((k) => (Object.hasOwn(k.testPaymentMethods!, name) ? `\`${k.testPaymentMethods![name]}\`` : '—')).join(' | ')} |`),
  ].join('\n');
}

/**
 * Whether a PSP of these capabilities can charge a saved card: by its own token where it saved
 * the card (`ownToken`: the saved method holds a token of this connection), else by the card
 * network's transaction id where its kind takes one from another processor.
 */
export function chargesSavedCard(capabilities: ProviderCapabilities, ownToken: boolean): boolean {
  return (capabilities.savedMethods && ownToken) || capabilities.networkTransactionIds;
}

/**
 * The capability × kind table of docs/ARCHITECTURE.md, generated from the descriptors (a test
 * holds the page to it): one row per capability, one column per kind.
 */
export function capabilityTable(): string {
  const kinds = knownProviderKinds.map(providerKind);
  const keys = Object.keys(kinds[0]!.capabilities) as (keyof ProviderCapabilities)[];
  const cell = (value: unknown) => (typeof value === 'boolean' ? (value ? 'yes' : 'no') : `\`${String(value)}\``);
  return [
    `| capability | ${kinds.map((k) => `\`${k.kind}\``).join(' | ')} |`,
    `|---|${kinds.map(() => '---|').join('')}`,
    ...keys.sort().map((key) => `| \`${key}\` | ${kinds.map((k) => cell(k.capabilities[key])).join(' | ')} |`),
  ].join('\n');
}

const providerNamePattern = /^[a-z0-9][a-z0-9-]{0,31}$/;

/** `webhookSecret` → `WEBHOOK_SECRET`. */
const variableSuffix = (key: string) => key.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase();
const variablePart = (name: string) => name.toUpperCase().replace(/-/g, '_');

/** The variable holding one connection's own setting: PROVIDER_SANDBOX_A_WEBHOOK_SECRET for `sandbox-a`'s webhookSecret. */
export function providerSettingVariable(name: string, key: string): string {
  return `PROVIDER_${variablePart(name)}_${variableSuffix(key)}`;
}

/** The kind-wide variable a connection falls back to: SANDBOX_WEBHOOK_SECRET for the sandbox's webhookSecret. */
export function kindSettingVariable(kind: string, key: string): string {
  return `${variablePart(kind)}_${variableSuffix(key)}`;
}

/** Every kind-wide variable the known kinds read (<KIND>_API_KEY, SANDBOX_WEBHOOK_SECRET, …). */
export function kindSettingVariables(): string[] {
  return [...kindsByName.values()].flatMap((kind) => Object.keys(kind.settings.shape).filter((key) => key !== 'url').map((key) => kindSettingVariable(kind.kind, key)));
}

/**
 * One connection: its kind's settings from the entry's URL (undefined: the kind's default) and
 * the environment. Throws with the reason, naming the connection.
 */
export function providerConnection(name: string, kindName: string, url: string | undefined, env: NodeJS.ProcessEnv): ProviderConnection {
  let kind: ProviderKind;
  try {
    kind = providerKind(kindName);
  } catch (error) {
    throw new Error(`provider "${name}": ${(error as Error).message}`);
  }
  const input: Record<string, unknown> = { url };
  const variables: Record<string, string> = {};
  for (const key of Object.keys(kind.settings.shape)) {
    if (key === 'url') continue;
    const own = providerSettingVariable(name, key);
    const shared = kindSettingVariable(kind.kind, key);
    input[key] = nonEmpty(env[own]) ?? nonEmpty(env[shared]) ?? null;
    variables[key] = `${own} or ${shared}`;
  }
  const parsed = kind.settings.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const key = String(issue.path[0] ?? '');
    const what = key === 'url' ? `URL "${url}"` : `${key} (${variables[key] ?? key})`;
    throw new Error(`provider "${name}" (${kind.kind}): ${what} ${issue.message}`);
  }
  return { name, kind: kind.kind, settings: parsed.data as ProviderConnection['settings'] };
}

const nonEmpty = (value: string | undefined) => (value === undefined || value === '' ? undefined : value);

/**
 * PROVIDERS: `name=kind:url,…` (`name=kind` takes the kind's default URL), e.g.
 * `sandbox-a=sandbox:http://127.0.0.1:4010,psp-eu=<kind>:https://psp.example`. Throws with
 * the reason for a malformed entry, a bad or repeated name, a missing or unknown kind, or
 * settings the kind refuses.
 */
export function parseProvidersList(list: string, env: NodeJS.ProcessEnv): ProviderConnection[] {
  const connections: ProviderConnection[] = [];
  for (const entry of list.split(',').map((e) => e.trim()).filter(Boolean)) {
    const at = entry.indexOf('=');
    if (at < 0) throw new Error(`"${entry}" is not name=kind:url`);
    const name = entry.slice(0, at).trim();
    const rest = entry.slice(at + 1).trim();
    if (!providerNamePattern.test(name)) throw new Error(`provider name "${name}" must be lowercase letters, digits and '-' (at most 32)`);
    if (connections.some((c) => c.name === name)) throw new Error(`provider name "${name}" is given twice`);
    const colon = rest.indexOf(':');
    const kind = (colon < 0 ? rest : rest.slice(0, colon)).trim();
    const url = colon < 0 ? undefined : rest.slice(colon + 1).trim();
    // A bare URL names no kind: nothing guesses one (`psp=https://…` is refused, not a sandbox).
    if (kind === '' || url?.startsWith('//')) {
      throw new Error(`provider "${name}": no kind given; write ${name}=<kind>:<url> (known kinds: ${knownProviderKinds.join(', ')})`);
    }
    connections.push(providerConnection(name, kind, url, env));
  }
  if (connections.length === 0) throw new Error('names no provider');
  return connections;
}

/** The configured names in order, the default first. */
export function configuredProviderNames(config: { readonly PROVIDERS: readonly ProviderConnection[] }): string[] {
  return config.PROVIDERS.map((p) => p.name);
}

/** The configured names whose kind reports the money it moved (a balance report): the ones reconciliation covers. */
export function reconciledProviderNames(config: { readonly PROVIDERS: readonly ProviderConnection[] }): string[] {
  return config.PROVIDERS.filter((p) => providerKind(p.kind).capabilities.balanceReport).map((p) => p.name);
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

/** One connection's client, made by its kind. */
export function createProviderClient(connection: ProviderConnection, config: { readonly PROVIDER_TIMEOUT_MS: number }): Promise<PaymentProvider> {
  return providerKind(connection.kind).createClient(connection.settings, { name: connection.name, timeoutMs: config.PROVIDER_TIMEOUT_MS });
}

/** One connection's webhook verification, made by its kind (no client needed). */
export function createProviderWebhookVerifier(connection: ProviderConnection): Promise<ProviderWebhookVerifier> {
  return providerKind(connection.kind).createWebhookVerifier(connection.settings);
}

/**
 * One connection's batch verification where its kind frames notifications in batches
 * (capabilities.notifications `batch`); null for a kind that sends one event per request.
 */
export async function createProviderWebhookBatchVerifier(connection: ProviderConnection): Promise<ProviderWebhookBatchVerifier | null> {
  const kind = providerKind(connection.kind);
  if (kind.capabilities.notifications !== 'batch') return null;
  if (!kind.createBatchVerifier) throw new Error(`the ${kind.kind} kind's notifications come in batches but it has no batch verification (createBatchVerifier)`);
  return kind.createBatchVerifier(connection.settings);
}

/** The registry of the configured PSPs (lib/config.ts PROVIDERS), one client each. */
export async function createProviderRegistry(config: { readonly PROVIDERS: readonly ProviderConnection[]; readonly PROVIDER_TIMEOUT_MS: number }): Promise<ProviderRegistry> {
  const clients = await Promise.all(config.PROVIDERS.map(async (c): Promise<[string, PaymentProvider]> => [c.name, await createProviderClient(c, config)]));
  return providerRegistry(clients);
}

/** Whether a value is a registry rather than one provider (callers that still pass one client). */
export function isProviderRegistry(value: PaymentProvider | ProviderRegistry): value is ProviderRegistry {
  return typeof (value as ProviderRegistry).get === 'function' && Array.isArray((value as ProviderRegistry).names);
}
