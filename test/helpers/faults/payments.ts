import { randomInt } from 'node:crypto';
import { apiClient, uniqueKey } from '../stack';
import type { Outcome } from './census';

export type Api = ReturnType<typeof apiClient>;
export type ApiResponse = Awaited<ReturnType<Api['post']>>;

export interface PaymentRequest {
  key: string;
  body: { order_id: string; amount_minor: number; currency: string; payment_method: string; capture_method?: 'automatic' | 'manual' };
  /** What the payment must end as. */
  outcome: Outcome;
}

/** A new payment request: its own key and order, so each trial is one order paid once. */
export function paymentRequest(method = 'pm_card_visa', capture: 'automatic' | 'manual' = 'automatic'): PaymentRequest {
  const outcome: Outcome = method === 'pm_card_declined' || method === 'pm_card_insufficient_funds' ? 'declined' : capture === 'manual' ? 'requires_capture' : 'succeeded';
  return {
    key: uniqueKey('fault'),
    body: { order_id: uniqueKey('ord'), amount_minor: randomInt(100, 100_000), currency: 'EUR', payment_method: method, capture_method: capture },
    outcome,
  };
}

/** The HTTP status a final answer for this outcome carries. */
export function finalStatusOf(outcome: Outcome): number {
  return outcome === 'declined' ? 402 : 201;
}

/** The payment a response talks about: the resource itself, or the one carried in an error. */
export function paymentIdIn(response: ApiResponse): string | null {
  return response.json?.id ?? response.json?.error?.payment?.id ?? null;
}

/**
 * Sends the same request until it gets a final answer (anything but 202 pending or 503
 * unavailable, as a well-behaved client would), honouring Retry-After loosely.
 */
export async function untilFinal(api: Api, request: PaymentRequest, timeoutMs: number): Promise<{ response: ApiResponse; attempts: number }> {
  const deadline = Date.now() + timeoutMs;
  for (let attempts = 1; ; attempts++) {
    let response: ApiResponse | null = null;
    try {
      response = await api.post('/v1/payments', request.body, request.key);
    } catch {
      // connection refused or reset: retry like a client would
    }
    if (response && response.status !== 202 && response.status !== 503) return { response, attempts };
    if (Date.now() > deadline) {
      if (response) return { response, attempts };
      throw new Error(`no answer for ${request.key} within ${timeoutMs} ms`);
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}
