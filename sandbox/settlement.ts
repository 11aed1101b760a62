import { chargeChanged } from './effects';
import type { ChargeRow } from './objects';
import { paymentMethodBehaviour } from './payment-methods';
import type { SandboxDeps } from './deps';

/**
 * Settles processing charges (pm_sepa_debit*) whose settle_at has come: succeeded (or
 * requires_capture when capture was false), or declined with debit_failed. The due time is
 * in the row, so charges that came due while the sandbox was down settle on its next pass
 * after a restart. SKIP LOCKED: several sandbox processes on one database settle each charge once.
 */
export async function settleDueCharges(deps: SandboxDeps, limit = 50): Promise<number> {
  return deps.sql.begin(async (tx) => {
    const due = await tx<ChargeRow[]>`
      SELECT * FROM sandbox.charges
      WHERE status = 'processing' AND settle_at <= clock_timestamp()
      ORDER BY settle_at
      LIMIT ${limit}
      FOR UPDATE SKIP LOCKED`;
    for (const row of due) {
      const behaviour = paymentMethodBehaviour(row.payment_method);
      const fails = behaviour?.kind === 'async' && behaviour.fails;
      const [settled] = fails
        ? await tx<ChargeRow[]>`
            UPDATE sandbox.charges
            SET status = 'declined', failure_code = 'debit_failed',
                failure_message = 'The bank refused the debit.', updated_at = clock_timestamp()
            WHERE id = ${row.id} RETURNING *`
        : await tx<ChargeRow[]>`
            UPDATE sandbox.charges
            SET status = CASE WHEN capture THEN 'succeeded' ELSE 'requires_capture' END,
                amount_captured_minor = CASE WHEN capture THEN amount_minor ELSE 0 END,
                updated_at = clock_timestamp()
            WHERE id = ${row.id} RETURNING *`;
      await chargeChanged(tx, deps, settled!);
    }
    return due.length;
  });
}

/** Runs a pass over due work (settlements, disputes) every pollMs until stopped; a pass never overlaps the next. */
export function startPollingLoop(pass: () => Promise<unknown>, pollMs: number, onError: (error: unknown) => void) {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  const tick = () => {
    running = pass()
      .then(() => undefined, onError)
      .finally(() => {
        if (!stopped) timer = setTimeout(tick, pollMs);
      });
  };
  timer = setTimeout(tick, 0);
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
