/**
 * The Adyen double's payments whose authorisation comes later (as Adyen answers some payments
 * `Received` and sends their outcome as an AUTHORISATION notification): the card held by
 * `AUTHORISATION_PENDING` is answered `Received`, and its AUTHORISATION (a success) is sent only
 * when a test asks for it, `POST /_sandbox/payments/{pspReference}/authorise`, captured at once
 * unless the payment asked for a manual capture.
 */
export const AUTHORISATION_PENDING_HOLDER = 'AUTHORISATION_PENDING';

interface PendingPayment {
  pspReference: string;
  value: number;
  authorised: boolean;
  capturedMinor: number;
}

export class PendingAuthorisations<P extends PendingPayment> {
  /** The payments answered `Received`, by PSP reference, with whether they asked for a manual capture. */
  private readonly held = new Map<string, { payment: P; manualCapture: boolean }>();

  /** Holds the payment when its card is the pending one; true when held (answer it `Received`). */
  hold(payment: P, holderName: string, manualCapture: boolean): boolean {
    if (holderName !== AUTHORISATION_PENDING_HOLDER) return false;
    this.held.set(payment.pspReference, { payment, manualCapture });
    return true;
  }

  /** Authorises a held payment (captured unless manual); the payment, or null when none is held under the reference. */
  authorise(pspReference: string): P | null {
    const held = this.held.get(pspReference);
    if (!held) return null;
    this.held.delete(pspReference);
    held.payment.authorised = true;
    if (!held.manualCapture) held.payment.capturedMinor = held.payment.value;
    return held.payment;
  }
}

/** The control call's path: the PSP reference it authorises, or null for another path. */
export function authoriseControl(method: string, path: string): string | null {
  const match = /^\/_sandbox\/payments\/([^/]+)\/authorise$/.exec(path);
  return match && method === 'POST' ? decodeURIComponent(match[1]!) : null;
}
