import { Context } from '@temporalio/activity';
import type { ProviderRegistry } from '../provider/registry';
import type { DisputeProvider, PaymentProvider } from '../provider/types';

/**
 * Each PSP's calls per second held across the fleet (PROVIDER_RATE_LIMITS; docs/CONTRACT.md
 * §3.7): every call of a limited PSP takes one token of its shared bucket first (`take`: in the
 * worker and the API, db/routing.ts takeCall over PostgreSQL). Over the limit the call waits for
 * the bucket's next token, never an error: in a regular activity while heartbeating; in a local
 * activity (the first charge attempt) at most `localWaitMs` in all, then ProviderCallDeferredError,
 * which sends the attempt to its regular activity (workflows/payments/charge.ts chargeAttempt),
 * where it waits; outside an activity (the API) as long as it takes. One mechanism: a Proxy over
 * the client, applied to the registry wherever one is built for activities or the API.
 */
export type CallPermit = { allowed: true } | { allowed: false; waitMs: number };

/** One token of the PSP's bucket: allowed now, or not before `waitMs`. */
export type TakeCall = (provider: string) => Promise<CallPermit>;

/** What a first charge attempt (a local activity) waits for a token at most before it leaves the call to its regular activity. */
export const LOCAL_CALL_WAIT_MS = 1000;

/** A call held back by its PSP's rate limit in a local activity: nothing was sent; the regular activity makes it. */
export class ProviderCallDeferredError extends Error {
  override readonly name = 'ProviderCallDeferredError';
  constructor(readonly provider: string, waitedMs: number) {
    super(`${provider}'s calls per second are used up (waited ${waitedMs} ms in the local activity); nothing was sent: the regular activity makes the call`);
  }
}

/** The calls that reach the PSP (verifyWebhook and verifyWebhookBatch are local: not limited). */
const limitedCalls = new Set(['createCharge', 'completeChallenge', 'findChargeByIdempotencyKey', 'listChargesByReference', 'captureCharge', 'voidCharge', 'createRefund', 'findRefundByIdempotencyKey', 'retrieveCharge', 'listBalanceTransactions']);
const limitedDisputeCalls = new Set(['retrieveDispute', 'listDisputes', 'retrieveEvidence', 'updateDispute', 'closeDispute']);

/**
 * Activity contexts whose caller heartbeats already (activities/provider-steps.ts providerCall,
 * with the step's details): a wait there adds no heartbeat of its own, which would carry none.
 */
export const heartbeatingContexts = new WeakSet<Context>();

function activityContext(): Context | null {
  try {
    return Context.current();
  } catch {
    return null; // not in an activity (the API)
  }
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', abort);
      resolve();
    }, ms);
    const abort = () => {
      clearTimeout(timer);
      reject(signal!.reason as Error);
    };
    signal?.addEventListener('abort', abort, { once: true });
  });
}

export interface CallLimitOptions {
  localWaitMs?: number;
}

/** Waits for one token of `name`'s bucket, as the caller's context allows (see the file's comment). */
async function permit(name: string, take: TakeCall, options: CallLimitOptions): Promise<void> {
  const context = activityContext();
  const local = context?.info.isLocal === true;
  const localWaitMs = options.localWaitMs ?? LOCAL_CALL_WAIT_MS;
  const started = Date.now();
  for (;;) {
    const got = await take(name);
    if (got.allowed) return;
    const waited = Date.now() - started;
    if (local && waited + got.waitMs > localWaitMs) throw new ProviderCallDeferredError(name, waited);
    if (context && !local && !heartbeatingContexts.has(context)) context.heartbeat();
    await sleep(got.waitMs, context?.cancellationSignal);
  }
}

function limitedObject<T extends object>(target: T, calls: ReadonlySet<string>, name: string, take: TakeCall, options: CallLimitOptions, nested?: (property: string, value: unknown) => unknown): T {
  return new Proxy(target, {
    get(object, property, receiver) {
      const value: unknown = Reflect.get(object, property, receiver);
      if (typeof property !== 'string') return value;
      const inner = nested?.(property, value);
      if (inner !== undefined) return inner;
      if (!calls.has(property) || typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        await permit(name, take, options);
        return (value as (...a: unknown[]) => Promise<unknown>).apply(object, args);
      };
    },
  });
}

/** The PSP `name` whose every call (its disputes' too) first takes a token (`take`). */
export function callLimitedProvider(provider: PaymentProvider, name: string, take: TakeCall, options: CallLimitOptions = {}): PaymentProvider {
  return limitedObject(provider, limitedCalls, name, take, options, (property, value) =>
    property === 'disputes' && value && typeof value === 'object' ? limitedObject(value as DisputeProvider, limitedDisputeCalls, name, take, options) : undefined,
  );
}

/**
 * The registry with each PSP that `limited` names wrapped by callLimitedProvider (the others as
 * they are: no token, no database call). The wrapped clients are made once.
 */
export function callLimitedRegistry(registry: ProviderRegistry, limited: readonly string[], take: TakeCall, options: CallLimitOptions = {}): ProviderRegistry {
  const wrapped = new Map(registry.names.filter((name) => limited.includes(name)).map((name) => [name, callLimitedProvider(registry.get(name), name, take, options)]));
  if (wrapped.size === 0) return registry;
  return {
    names: registry.names,
    defaultName: registry.defaultName,
    has: (name) => registry.has(name),
    get: (name) => wrapped.get(name) ?? registry.get(name),
  };
}
