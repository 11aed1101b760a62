/** What each PSP holds, in the shapes the checker reads (a sandbox's tables; a double's census, chaos/psp-doubles.ts). */

/** A charge at a PSP (a sandbox's `sandbox.charges` row): its state, the money it holds, and the reference and key it came with. */
interface ChargeRow {
  id: string;
  status: string;
  amount_captured_minor: number;
  amount_refunded_minor: number;
  currency: string;
  reference: string;
  idempotency_key: string;
}
/** A charge and the PSP that holds it. */
export type PspCharge = ChargeRow & { provider: string };
/** A refund at a PSP: its id, the charge it refunds, and the reference and key it came with. */
export interface ProviderRefundRow {
  provider: string;
  id: string;
  charge_id: string;
  amount_minor: number;
  status: string;
  reference: string;
  idempotency_key: string;
}
