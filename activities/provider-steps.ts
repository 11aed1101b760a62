import { ApplicationFailure, Context, log } from '@temporalio/activity';
import { providerSubKey } from '../shared/keys';
import { FailureType } from '../shared/definitions';
import { killPoint } from '../lib/kill-points';
import { isProviderRegistry, providerRegistry, type ProviderRegistry } from '../provider/registry';
import { ProviderRejectedError, type PaymentProvider, type ProviderCharge, type ProviderRefund } from '../provider/types';

/**
 * Runs one provider call while heartbeating, so that a worker killed mid-call is noticed
 * within the heartbeat timeout and the step is retried elsewhere (looking the operation up
 * first). The activity's cancellation aborts the HTTP call.
 */
/** What a client reads when the provider refused a request (failure code `provider_rejected`). */
export const PROVIDER_REJECTED_MESSAGE = 'The payment provider refused the request; nothing was charged or refunded.';

async function providerCall<T>(call: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const context = Context.current();
  const beat = setInterval(() => context.heartbeat(), 1000);
  try {
    const answer = await call(context.cancellationSignal);
    killPoint('after-provider-answer');
    return answer;
  } catch (error) {
    if (error instanceof ProviderRejectedError) {
      // Nothing happened at the provider and the same request cannot succeed later. Its own
      // words (which name its endpoints and echo our input) go to the log, never to clients:
      // the failure's message is what the payment or refund records and the API answers.
      context.log.warn('provider rejected the request', { provider_message: error.message, provider_code: error.code, provider_status: error.status });
      throw ApplicationFailure.create({ type: FailureType.ProviderRejected, message: PROVIDER_REJECTED_MESSAGE, nonRetryable: true, details: [error.code] });
    }
    throw error; // unknown outcome: retried with the same sub-key, lookup first
  } finally {
    clearInterval(beat);
  }
}

/** After a timeout or unknown outcome, the next attempt asks the provider before acting again. */
function isRetryAttempt(): boolean {
  return Context.current().info.attempt > 1;
}

export interface ChargeInput {
  paymentId: string;
  amountMinor: number;
  currency: string;
  paymentMethod: string;
  capture: boolean;
  description: string | null;
  /** Where the PSP's challenge page sends the customer back (absent in runs from before it existed). */
  returnUrl?: string | null;
}

export interface ChargeStepInput {
  paymentId: string;
  chargeId: string;
}

export function createProviderSteps(providers: ProviderRegistry | PaymentProvider) {
  const registry = isProviderRegistry(providers) ? providers : providerRegistry({ sandbox: providers });
  const provider = registry.get(registry.defaultName);
  /** The charge made under this payment's charge sub-key, in its current state, if any. */
  const findCharge = (paymentId: string, signal: AbortSignal) =>
    provider.findChargeByIdempotencyKey(providerSubKey.charge(paymentId), { signal });

  return {
    /** Charges (or authorizes) the payment once: a decline is a result, not an error. */
    async chargePayment(input: ChargeInput): Promise<ProviderCharge> {
      return providerCall(async (signal) => {
        if (isRetryAttempt()) {
          const existing = await findCharge(input.paymentId, signal);
          log.info('charge looked up before retrying', { payment_id: input.paymentId, found: existing?.id ?? null });
          if (existing) return existing;
        }
        log.info('charging', { payment_id: input.paymentId, amount_minor: input.amountMinor, currency: input.currency, capture: input.capture });
        return provider.createCharge(
          {
            idempotencyKey: providerSubKey.charge(input.paymentId),
            amountMinor: input.amountMinor,
            currency: input.currency,
            paymentMethod: input.paymentMethod,
            capture: input.capture,
            reference: input.paymentId,
            description: input.description,
            returnUrl: input.returnUrl ?? null,
          },
          { signal },
        );
      });
    },

    /** Captures an authorization (all of it, or amountMinor of it) once. */
    async captureCharge(input: ChargeStepInput & { amountMinor: number }): Promise<ProviderCharge> {
      return providerCall(async (signal) => {
        if (isRetryAttempt()) {
          const existing = await findCharge(input.paymentId, signal);
          if (existing && existing.status === 'succeeded') return existing;
        }
        return provider.captureCharge(
          { idempotencyKey: providerSubKey.capture(input.paymentId), chargeId: input.chargeId, amountMinor: input.amountMinor },
          { signal },
        );
      });
    },

    /** Voids an uncaptured authorization once (cancel, expiry, or compensation). */
    async voidCharge(input: ChargeStepInput): Promise<ProviderCharge> {
      return providerCall(async (signal) => {
        if (isRetryAttempt()) {
          const existing = await findCharge(input.paymentId, signal);
          if (existing && existing.status === 'canceled') return existing;
        }
        return provider.voidCharge({ idempotencyKey: providerSubKey.void(input.paymentId), chargeId: input.chargeId }, { signal });
      });
    },

    /**
     * The charge as the PSP holds it now: the status poll of a waiting payment. Reads only, so
     * it needs no sub-key; an unknown outcome is retried like any provider call.
     */
    async retrieveCharge(input: ChargeStepInput): Promise<ProviderCharge> {
      return providerCall((signal) => provider.retrieveCharge(input.chargeId, { signal }));
    },

    /** Refunds part or all of a captured charge once, under the given sub-key. */
    async refundCharge(input: { subKey: string; chargeId: string; amountMinor: number; reference: string }): Promise<ProviderRefund> {
      return providerCall(async (signal) => {
        if (isRetryAttempt()) {
          const existing = await provider.findRefundByIdempotencyKey(input.subKey, { signal });
          if (existing) return existing;
        }
        return provider.createRefund(
          { idempotencyKey: input.subKey, chargeId: input.chargeId, amountMinor: input.amountMinor, reference: input.reference },
          { signal },
        );
      });
    },
  };
}

export type ProviderSteps = ReturnType<typeof createProviderSteps>;
