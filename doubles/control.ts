/**
 * The control calls every PSP double answers (provider/kind.ts ProviderDouble; each double's own
 * server in doubles/<kind>/), as the sandbox answers them (sandbox/routes/admin.ts): what the
 * chaos run (chaos/environment.ts, chaos/psp-doubles.ts) and the tests drive a double with.
 *
 * - `GET /_sandbox/payments[?reference=]`: the census, `{ data: DoubleCensusPayment[] }`, read-only;
 * - `POST /_sandbox/webhook_faults`: the sandbox's webhook faults (sandbox/webhooks.ts's body) on its webhooks;
 * - `POST /_sandbox/events/{id}/redeliver`: a webhook it lost sent again;
 * - `POST /_sandbox/outage`: `{ mode, for_ms? }`, its outage modes (DOUBLE_OUTAGE_MODES; `down` listens to nothing for `for_ms`).
 */

/** The outage modes of a double (besides `none`): 503 having done nothing, nothing listening, answers lost after the work is done. */
export const DOUBLE_OUTAGE_MODES = ['unavailable', 'down', 'lose-answers'] as const;
export type DoubleOutageMode = (typeof DOUBLE_OUTAGE_MODES)[number];

/** One payment of a double's census, as `GET /_sandbox/payments` answers it. */
export interface DoubleCensusPayment {
  /** The PSP's id of the payment. */
  pspReference: string;
  /** Our reference it was made under (the payment id). */
  merchantReference: string;
  /** The Idempotency-Key the payment was made under (null: none was sent). */
  idempotencyKey: string | null;
  amount: { value: number; currency: string };
  /** The PSP's own word for its first answer. */
  resultCode: string;
  /**
   * `refused`; `challenged`, its 3-D Secure challenge still open (neither decided nor
   * cancelled); `authorised`, still open; `captured`, some or all of it; `cancelled`, its
   * authorisation (or challenge) cancelled.
   */
  state: 'refused' | 'challenged' | 'authorised' | 'captured' | 'cancelled';
  capturedMinor: number;
  refundedMinor: number;
  /** Its captures, cancels and refunds: `received` until the webhook that decides it, then `succeeded` or `failed`. */
  modifications: {
    type: 'capture' | 'cancel' | 'refund';
    pspReference: string;
    reference: string | null;
    idempotencyKey: string | null;
    amount: { value: number; currency: string } | null;
    status: 'received' | 'succeeded' | 'failed';
  }[];
  /** Its webhooks by the id our webhook route stores them under, and what became of each. */
  notifications: { id: string; eventCode: string; pspReference: string; success: boolean; state: 'pending' | 'delivered' | 'lost'; attempts: number }[];
}
