import { eventFromNotification } from '../../provider/adyen/wire';
import type { DoubleCensusPayment } from '../control';
import type { KeptNotification } from './notifications';

/** What the census reads of one payment the double holds (server.ts's HeldPayment). */
export interface CensusPayment {
  pspReference: string;
  merchantReference: string;
  value: number;
  currency: string;
  authorised: boolean;
  capturedMinor: number;
  refundedMinor: number;
  /** A 3-D Secure payment: its outcome once the shopper decided (null: not yet). */
  challenged?: { answer: unknown };
}

/** A request the double acted on: its route, the Idempotency-Key it came with, and its first answer. */
interface NotedRequest {
  type: 'payment' | 'capture' | 'cancel' | 'refund';
  idempotencyKey: string | null;
  /** The payment's PSP reference (a payment's own; a modification's original). */
  paymentPspReference: string;
  /** The modification's own PSP reference (a payment's is its own). */
  pspReference: string;
  /** The merchant's reference the request named (a modification's `reference`). */
  reference: string | null;
  amount: { value: number; currency: string } | null;
}

/** One payment of the double's census as `GET /_sandbox/payments` answers it (the doubles' shared shape, ../control.ts), with Adyen's result codes. */
export type AdyenCensusPayment = DoubleCensusPayment & { resultCode: 'Authorised' | 'Refused' | 'RedirectShopper' };

const MODIFICATION = /^\/payments\/([^/]+)\/(captures|cancels|refunds)$/;
const TYPE_OF = { captures: 'capture', cancels: 'cancel', refunds: 'refund' } as const;
/** The notification that decides each modification (its outcome is the notification's `success`). */
const DECIDED_BY: Record<NotedRequest['type'], readonly string[]> = {
  payment: ['AUTHORISATION'],
  capture: ['CAPTURE', 'CAPTURE_FAILED'],
  cancel: ['CANCELLATION', 'TECHNICAL_CANCEL'],
  refund: ['REFUND', 'REFUND_FAILED'],
};

/**
 * The double's census, read-only (`GET /_sandbox/payments`, or `?reference=` for one merchant
 * reference): every payment it made, with what it charged, captured, cancelled and refunded, each
 * modification with the Idempotency-Key and reference it came with and what its notification
 * said, and every notification with what became of it (delivered, pending, lost). A chaos run's
 * checker reads it as it reads a sandbox's tables (chaos/checker.ts). server.ts notes each
 * request it acted on (not a replay, not a refusal) and hands its control calls here first.
 */
export class AdyenCensus {
  private readonly requests: NotedRequest[] = [];

  constructor(private readonly state: { payments: ReadonlyMap<string, CensusPayment>; notifications: () => readonly KeptNotification[] }) {}

  /** Notes a request the double answered for the first time (`route` without its version prefix). */
  note(route: string, idempotencyKey: string | null, answer: { status: number; body: unknown }): void {
    if (answer.status >= 300) return;
    const body = answer.body as { pspReference?: string; paymentPspReference?: string; paymentReference?: string; reference?: string; merchantReference?: string; amount?: { value: number; currency: string } };
    const modification = MODIFICATION.exec(route);
    // A redirect answered without its pspReference, and a cancel by merchant reference (/cancels), name the payment by our reference: the latest payment under it.
    const byReference = route === '/payments' ? body.merchantReference : route === '/cancels' ? body.paymentReference : undefined;
    const named = byReference === undefined ? undefined : [...this.state.payments.values()].reverse().find((p) => p.merchantReference === byReference)?.pspReference;
    const paymentPspReference = body.paymentPspReference ?? (route === '/payments' ? (body.pspReference ?? named) : named);
    const pspReference = route === '/payments' ? paymentPspReference : body.pspReference;
    if (!paymentPspReference || !pspReference || (route !== '/payments' && route !== '/cancels' && !modification)) return;
    this.requests.push({
      type: modification ? TYPE_OF[modification[2] as keyof typeof TYPE_OF] : route === '/cancels' ? 'cancel' : 'payment',
      idempotencyKey,
      paymentPspReference,
      pspReference,
      reference: (route === '/payments' ? body.merchantReference : body.reference) ?? null,
      amount: body.amount ?? null,
    });
  }

  /** `GET /_sandbox/payments[?reference=]`; null for any other path (not the census's). */
  control(method: string, path: string, query: URLSearchParams): { status: number; body: unknown } | null {
    if (path !== '/_sandbox/payments') return null;
    if (method !== 'GET') return { status: 405, body: { status: 405, errorCode: '905', message: `Method ${method} not allowed`, errorType: 'validation' } };
    const reference = query.get('reference');
    const payments = [...this.state.payments.values()].filter((p) => reference === null || p.merchantReference === reference);
    return { status: 200, body: { object: 'list', data: payments.map((p) => this.describe(p)) } };
  }

  private describe(payment: CensusPayment): AdyenCensusPayment {
    const notifications = this.state.notifications().filter((k) => (k.item.originalReference ?? k.item.pspReference) === payment.pspReference);
    /** What the notification deciding a request said: true, false, or null (none made yet). */
    const outcome = (request: Pick<NotedRequest, 'type' | 'pspReference'>) => {
      const decided = notifications.find((k) => k.item.pspReference === request.pspReference && DECIDED_BY[request.type].includes(String(k.item.eventCode)));
      return decided ? String(decided.item.success) === 'true' : null;
    };
    const own = this.requests.filter((r) => r.paymentPspReference === payment.pspReference);
    const created = own.find((r) => r.type === 'payment');
    const authorised = outcome({ type: 'payment', pspReference: payment.pspReference });
    const challengeOpen = payment.challenged !== undefined && payment.challenged.answer === null && !own.some((r) => r.type === 'cancel' && outcome(r) === true);
    return {
      pspReference: payment.pspReference,
      merchantReference: payment.merchantReference,
      idempotencyKey: created?.idempotencyKey ?? null,
      amount: { value: payment.value, currency: payment.currency },
      resultCode: authorised === false ? 'Refused' : challengeOpen ? 'RedirectShopper' : 'Authorised',
      state: authorised === false ? 'refused' : challengeOpen ? 'challenged' : !payment.authorised ? 'cancelled' : payment.capturedMinor > 0 ? 'captured' : 'authorised',
      capturedMinor: payment.capturedMinor,
      refundedMinor: payment.refundedMinor,
      modifications: own
        .filter((r) => r.type !== 'payment')
        .map((r) => {
          const success = outcome(r);
          return { type: r.type as 'capture' | 'cancel' | 'refund', pspReference: r.pspReference, reference: r.reference, idempotencyKey: r.idempotencyKey, amount: r.amount, status: success === null ? ('received' as const) : success ? ('succeeded' as const) : ('failed' as const) };
        }),
      notifications: notifications.map((k) => ({ id: eventFromNotification(k.item).id, eventCode: String(k.item.eventCode), pspReference: k.item.pspReference, success: String(k.item.success) === 'true', state: k.state, attempts: k.attempts })),
    };
  }
}

