import type { DoubleCensusPayment } from '../doubles/control';
import type { ProviderRefundRow, PspCharge } from './psp-rows';
import type { VerdictFn } from './tally';

/**
 * The census of a PSP double that keeps no database of its own (chaos/environment.ts DOUBLE_PSP):
 * read through its read-only control call (`GET /_sandbox/payments`, doubles/control.ts),
 * and put in the shapes the checker reads the sandboxes' tables in (chaos/checker.ts), so every
 * check across the PSPs counts it like the others.
 */

/** Every payment the double holds, as its census call answers them (throws when it does not answer 200). */
export async function readDoubleCensus(url: string): Promise<DoubleCensusPayment[]> {
  const response = await fetch(`${url}/_sandbox/payments`, { signal: AbortSignal.timeout(30_000) });
  if (response.status !== 200) throw new Error(`the census of the double at ${url} answered ${response.status}: ${await response.text()}`);
  return ((await response.json()) as { data: DoubleCensusPayment[] }).data;
}

/** The double's states as the sandbox's charge statuses: an open challenge is `requires_action`, an open authorisation `requires_capture`, a captured one `succeeded`. */
const chargeStatus: Record<DoubleCensusPayment['state'], string> = { refused: 'declined', challenged: 'requires_action', authorised: 'requires_capture', captured: 'succeeded', cancelled: 'canceled' };
/** A modification `received` and not yet decided by its notification is `pending`, as a sandbox refund would be. */
const refundStatus: Record<DoubleCensusPayment['modifications'][number]['status'], string> = { received: 'pending', succeeded: 'succeeded', failed: 'failed' };

/** The double's payments and refunds as charges and provider refunds of the PSP `provider`. */
export function holdingsOfDouble(provider: string, census: readonly DoubleCensusPayment[]): { charges: PspCharge[]; refunds: ProviderRefundRow[] } {
  const charges = census.map((p) => ({
    provider,
    id: p.pspReference,
    status: chargeStatus[p.state],
    amount_captured_minor: p.capturedMinor,
    amount_refunded_minor: p.refundedMinor,
    currency: p.amount.currency,
    reference: p.merchantReference,
    idempotency_key: p.idempotencyKey ?? '',
  }));
  const refunds = census.flatMap((p) =>
    p.modifications
      .filter((m) => m.type === 'refund')
      .map((m) => ({ provider, id: m.pspReference, charge_id: p.pspReference, amount_minor: m.amount?.value ?? 0, status: refundStatus[m.status], reference: m.reference ?? '', idempotency_key: m.idempotencyKey ?? '' })),
  );
  return { charges, refunds };
}

/** A webhook we stored (`provider_events`): the payment it was about, if any. */
export interface StoredProviderEvent {
  provider: string;
  event_id: string;
  payment_id: string | null;
}

/** One of our refunds, by the PSP's id for it. */
export interface RefundByPspId {
  id: string;
  provider_refund_id: string | null;
  status: string;
}

/**
 * The double's notifications against what we stored and did (notifications acted on once):
 * every one delivered (none lost or pending once the run is quiet), stored once under its id
 * (provider_events' key), about the payment it names (its merchant reference) when it names one
 * of ours; and every notification that decides one of our refunds decided it as it
 * said (succeeded on a successful one, failed otherwise). A refund's first settlement counts.
 */
export function checkDoubleNotifications(
  input: { provider: string; census: readonly DoubleCensusPayment[]; stored: readonly StoredProviderEvent[]; refunds: readonly RefundByPspId[]; paymentIds: ReadonlySet<string> },
  verdict: VerdictFn,
  into: (paymentId: string) => string[] | undefined = () => undefined,
): void {
  const stored = new Map(input.stored.filter((e) => e.provider === input.provider).map((e) => [e.event_id, e]));
  const refundByPspId = new Map(input.refunds.filter((r) => r.provider_refund_id !== null).map((r) => [r.provider_refund_id!, r]));
  for (const payment of input.census) {
    const own = into(payment.merchantReference);
    for (const notification of payment.notifications) {
      const subject = `${input.provider} ${notification.eventCode} ${notification.id} of payment ${payment.merchantReference} (${payment.pspReference})`;
      const row = stored.get(notification.id);
      const underItsPayment = row !== undefined && (row.payment_id === null || row.payment_id === payment.merchantReference || !input.paymentIds.has(payment.merchantReference));
      verdict('PSP notification delivered and stored once', notification.state === 'delivered' && underItsPayment, () =>
        `${subject} is ${notification.state} after ${notification.attempts} sends; stored: ${row ? `under payment ${row.payment_id ?? 'none'}` : 'no'}`, own);
    }
    for (const refund of payment.modifications.filter((m) => m.type === 'refund' && m.status !== 'received')) {
      const ours = refundByPspId.get(refund.pspReference);
      if (!ours) continue; // a compensation's refund: counted as given back when received (CONTRACT §2)
      verdict('refund notification acted on', ours.status === refund.status, () =>
        `${input.provider} refund ${refund.pspReference} of payment ${payment.merchantReference} is ${refund.status} at the PSP; our refund ${ours.id} is ${ours.status}`, own);
    }
  }
}
