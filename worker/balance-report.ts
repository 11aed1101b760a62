/**
 * TEMPORARY: the PSP's balance-transaction report as /work/wt/COORDINATION.md specifies it for
 * provider/types.ts (owned by the psp branch). Removed, with the cast in reconciliation.ts,
 * once that lands.
 */
import type { CallOptions, PaymentProvider } from '../provider/types';

export interface ProviderBalanceTransaction {
  id: string;
  type: 'charge' | 'refund';
  source: string;
  chargeId: string;
  reference: string | null;
  amountMinor: number;
  feeMinor: number;
  currency: string;
  status: 'pending' | 'available';
  createdAt: Date;
}

export type ReportingProvider = PaymentProvider & {
  listBalanceTransactions(
    query: { from: Date; to: Date; startingAfter?: string; limit?: number },
    options?: CallOptions,
  ): Promise<{ data: ProviderBalanceTransaction[]; hasMore: boolean }>;
};
