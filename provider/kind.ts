import { z } from 'zod';
import type { PaymentMethodType } from '../domain/payment-methods';
import type { PaymentProvider, ProviderWebhookEvent } from './types';

/**
 * What a kind of PSP can do, where the orchestrator's behaviour depends on it. Everything of
 * PaymentProvider is required of every kind (charges, captures, voids, refunds, lookups by our
 * idempotency key, polls): effectively-once payments rest on them.
 */
export interface ProviderCapabilities {
  /**
   * listBalanceTransactions reports the money the PSP moved: the hourly reconciliation runs for
   * each connection of this kind (worker/schedules.ts). false: it has no Schedule.
   */
  balanceReport: boolean;
  /**
   * listChargesByReference lists every charge made for our reference (our payment id), in its
   * live state: reconciliation checks a capture its report lacks against it, gives back a
   * duplicate charge found there, and the abandoned-run sweep asks it what a closed run left.
   * false (a PSP with no search by merchant reference): none of them asks this kind, and what only
   * the search could show is left to the report and an operator.
   */
  chargeSearch: boolean;
  /**
   * How a charge's unknown outcome (a lost answer) is resolved under our idempotency key:
   * `lookup`: findChargeByIdempotencyKey reads what the create wrote, so "none found" proves
   * that no charge was made; `lagging-lookup`: the lookup is a search index that lags (up to
   * about a minute at the PSPs that have one), so "none found" soon after a lost answer does not mean "none made";
   * `replay`: there is no lookup, the same request sent again under its Idempotency-Key answers
   * what the first one did. The charge step (activities/provider-steps.ts) looks up
   * first or replays accordingly, and the failover rule moves a payment on after lost answers
   * only at a `lookup` kind: only there can "none found" prove that no charge exists.
   */
  unknownOutcome: 'lookup' | 'lagging-lookup' | 'replay';
  /**
   * Whether a capture, cancel or refund is `final` in the PSP's answer, or `notified`: the
   * answer only says the PSP received it, and a later notification confirms or refuses it (the
   * PSP's notification of each capture, cancel and refund, or of its failure). A notified capture
   * or refund is never shown `succeeded` before its confirmation (a refund's answer is `pending`).
   */
  modifications: 'final' | 'notified';
  /**
   * How the PSP frames its webhooks and what it must be answered: `event`, one event per
   * request, answered 2xx with our JSON; `batch`, several signed items per request, answered
   * with the body `[accepted]` (api/routes/provider-webhooks.ts).
   */
  notifications: 'event' | 'batch';
  /**
   * Whether the adapter can save a card (setup_future_usage) and charge the card it saved, by
   * its own token, without the customer (off_session). false: the API refuses
   * setup_future_usage for a tenant whose route reaches a PSP of this kind, and routing never
   * sends a saved card there unless it takes network transaction ids.
   */
  savedMethods: boolean;
  /**
   * Whether the adapter can charge a card saved at another PSP, as a merchant-initiated
   * transaction naming the card network's transaction id of the card's first payment (and the
   * card's details). false (a PSP whose API takes no such id): a saved card goes only to a PSP of
   * this kind that holds its own token for it; routing (activities/routing.ts) drops the others
   * from the payment's route, and the API refuses the payment when none is left.
   */
  networkTransactionIds: boolean;
  /**
   * How the orchestrator knows where a dispute stands (a kind whose client has `disputes`):
   * `retrieval`, the PSP's disputes can be read (retrieveDispute, listDisputes,
   * retrieveEvidence): a webhook is a hint and the dispute is read from the PSP, the dispute's
   * run looks at the PSP on its schedule and at the deadline, reconciliation lists the disputes
   * it never saw, and a retried command looks before it repeats; `notification`, the PSP has no
   * read of a dispute (its disputes API only answers commands): its signed notification is
   * the dispute, the run never asks the PSP (it waits for the next notification, the deadline's
   * included), nothing lists its disputes, and a retried command is the same request replayed
   * under its key (activities/disputes.ts, api/routes/provider-webhooks.ts).
   */
  disputeSource: 'retrieval' | 'notification';
  /**
   * Where the PSP sends the customer after a 3-D Secure challenge, and what decides it then:
   * `merchant`, straight to the merchant's return_url, the PSP reporting the outcome itself
   * (webhook, poll); `orchestrator`, to our return route (GET /return/{payment_id}, the returnUrl
   * the charge step sends: ActivityDeps.returnRoute), whose details call
   * (PaymentProvider.completeChallenge, with what the PSP sent the customer back with) completes
   * the payment through its run before the customer goes on to the merchant's return_url
   * (its details call with what the PSP appended to the returnUrl). The PSP's notification decides it too.
   */
  challengeReturn: 'merchant' | 'orchestrator';
}

/**
 * The payment methods a kind charges (provider/registry.ts supportsMethod reads it): a PSP whose
 * kind does not support a payment's method is no candidate for it.
 */
export interface PaymentMethodSupport {
  /** The types of payment method its adapter charges; a saved method of ours is a `card`. */
  types: readonly PaymentMethodType[];
  /**
   * The test payment methods its PSP for tests has: `all` of ours (domain/payment-methods.ts
   * TEST_PAYMENT_METHODS: the sandbox, whose names they are), or these names (ours it has an
   * instrument for, and its own). Any other name of a test method's shape is unsupported.
   */
  testMethods: 'all' | readonly string[];
  /**
   * Whether a payment method that is neither a test method nor a saved method of ours (a token
   * the merchant got from the PSP, such as `pm_1Q…`) goes to it as given. false: its
   * adapter charges nothing else (the sandbox takes its names and tokens it saved; another kind's
   * client, its test cards and the cards it stored).
   */
  pspTokens: boolean;
}

/** Checks a PSP's webhook on its raw body (headers by any case); throws ProviderWebhookError for a bad, missing or stale signature, or a body that is not an event. */
export type ProviderWebhookVerifier = (rawBody: string, headers: Record<string, string | undefined>, now?: Date) => ProviderWebhookEvent;

/**
 * A `batch` kind's webhook check: every item of the batch verified and read, each with the item
 * as the PSP sent it (what is stored); throws as ProviderWebhookVerifier does, for the whole batch.
 */
export type ProviderWebhookBatchVerifier = (rawBody: string, headers: Record<string, string | undefined>, now?: Date) => { event: ProviderWebhookEvent; payload: unknown }[];

/** What every connection's client gets besides its kind's settings. */
export interface ProviderClientOptions {
  /** The connection's configured name (PROVIDERS). */
  name: string;
  /** One call to the PSP; past it the outcome is unknown (PROVIDER_TIMEOUT_MS). */
  timeoutMs: number;
}

/**
 * A double of a kind's PSP: a process of ours that speaks its API, in memory, for tests, `npm
 * start` (PSP_DOUBLES=<kind>, devstack/supervisor.ts) and the chaos run (chaos/environment.ts).
 * The kind declares it (provider/<kind>/double.ts); its code is in its own folder
 * (doubles/<kind>/). Every double answers the same control calls (doubles/control.ts).
 */
export interface ProviderDouble {
  /** The PSP name its connection gets (`<kind>-test`): the connection's name in PROVIDERS and its inbound route's. */
  name: string;
  /** Its process's entry point, from the repository's root (`doubles/<kind>/main.ts`). */
  script: string;
  /** The variable its process reads its port from (a configuration key of `npm start`), and that port's default. */
  portVariable: string;
  defaultPort: number;
  /** The variable its process reads our inbound route's URL from (where it sends its webhooks). */
  webhookUrlVariable: string;
  /**
   * The variables the double and its connection share (the double's process, the API and the
   * worker read each one the same), given the double's URL: a variable `env` sets is kept, any
   * other is made up (fresh secrets each start).
   */
  environment(url: string, env: Readonly<Record<string, string | undefined>>): Record<string, string>;
  /** What `npm start`'s banner says of it besides its URL, given its environment. */
  describe(environment: Readonly<Record<string, string>>): string;
  /**
   * The test payment methods the chaos run's clients pay with at it, with their weights: the
   * stories it can tell (a subset of the kind's `paymentMethods.testMethods`).
   */
  chaosMethods: Readonly<Record<string, number>>;
}

/** Every kind's settings have the PSP's base URL (the entry's URL, else the kind's default). */
export type ProviderSettingsSchema = z.ZodObject<{ url: z.ZodType<string, string | undefined> } & z.ZodRawShape>;

/**
 * One kind of PSP: what provider/<kind>/index.ts exports and provider/kinds.ts lists. Adding a
 * PSP is one such folder (with its double's, doubles/<kind>/, if it has one), one line in
 * provider/kinds.ts and, if its client uses one, its SDK in package.json (docs/new-psp-kind.md);
 * nothing else branches on a kind or names one (test/unit/kind-folders.test.ts).
 */
export interface ProviderKind<Schema extends ProviderSettingsSchema = ProviderSettingsSchema> {
  /** The name a connection gives in PROVIDERS (`name=<kind>:<url>`): lowercase letters, digits and '-'. */
  kind: string;
  /**
   * What one connection of this kind needs. `url` comes from the connection's entry; every other
   * key `fooBar` from PROVIDER_<NAME>_FOO_BAR, else the kind-wide <KIND>_FOO_BAR (lib/config.ts);
   * an unset variable reads as null.
   */
  settings: Schema;
  capabilities: ProviderCapabilities;
  /**
   * Its webhooks as a PSP sends them, for people (the inbound route's OpenAPI text,
   * api/routes/provider-webhooks.ts): the body's shape, where its signature is, and the bounds
   * of its identifiers where the PSP documents shorter ones than 255 (its wire schema holds them).
   */
  webhookBody: string;
  /** The payment methods it charges. */
  paymentMethods: PaymentMethodSupport;
  /**
   * Our test payment methods (the sandbox's names: `pm_card_visa`, `pm_card_declined`, …) as this
   * kind's own test instruments, for the ones it has: the charge step sends the kind's token in
   * their place, so one flow runs against every kind. Absent: the names are the kind's own (the
   * sandbox), or its client reads them itself (as test cards of its own, provider/<kind>/wire.ts).
   */
  testPaymentMethods?: Readonly<Record<string, string>>;
  /**
   * The connection's client. Asynchronous so that the kind's client code (and its SDK) is
   * imported only by a process that connects to such a PSP: every process reads PROVIDERS.
   */
  createClient(settings: z.output<Schema>, options: ProviderClientOptions): Promise<PaymentProvider>;
  /** The connection's webhook verification (the API verifies without a client). */
  createWebhookVerifier(settings: z.output<Schema>): Promise<ProviderWebhookVerifier>;
  /** The connection's batch verification: required of a kind whose `notifications` are `batch`. */
  createBatchVerifier?(settings: z.output<Schema>): Promise<ProviderWebhookBatchVerifier>;
  /** Its PSP's double, when it has one (provider/<kind>/double.ts): `npm start` runs it under PSP_DOUBLES=<kind>. */
  double?: ProviderDouble;
}

/** A kind with its settings' type checked against its factories. */
export function defineProviderKind<Schema extends ProviderSettingsSchema>(kind: ProviderKind<Schema>): ProviderKind {
  return kind as unknown as ProviderKind;
}

/** An http(s) URL: a connection's base URL. */
export function httpUrl() {
  return z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' });
}
