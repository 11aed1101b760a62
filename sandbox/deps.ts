import type { Sql } from '../db/connect';

/** What the sandbox's app and routes are built from (apart from the app, so the routes do not import it). */
export interface SandboxConfig {
  /** How long pm_card_slow takes to answer. */
  slowMs: number;
  /** How many attempts of one key pm_card_flaky fails with 503 before it succeeds. */
  flakyFailures: number;
  /** Idempotency keys are forgotten this many seconds after first use; null: never. */
  idempotencyKeyTtlSeconds: number | null;
  /** pm_sepa_debit*: how long a charge stays processing before it settles. */
  asyncSettleMs: number;
  /** Balance transactions turn from 'pending' to 'available' this long after they are made. */
  availableAfterMs: number;
  /** pm_card_createDispute*: how long after the capture the network opens the dispute. */
  disputeAfterMs: number;
  /** How long after evidence is submitted the network decides. */
  disputeDecisionMs: number;
  /** How long a dispute waits for evidence; unanswered by then, it is lost (an inquiry escalates). */
  disputeEvidenceSeconds: number;
  /** The simulated card network's key (SANDBOX_NETWORK_KEY): network transaction ids are signed and verified with it (network.ts). */
  networkKey: string;
  /** Multiplies the network's durations (advice waits, the 24-hour and 30-day windows): SANDBOX_NETWORK_TIME_SCALE, as RECOVERY_TIME_SCALE. */
  networkTimeScale: number;
}

/**
 * The sandbox's outage modes: POST /_sandbox/outage. `declining`: the PSP's processor
 * is failing, so every new charge is declined with `processing_error` (a code another PSP may accept).
 */
export type OutageMode = 'none' | 'unavailable' | 'down' | 'timeout' | 'declining';

/** Webhook faults (SANDBOX_WEBHOOK_FAULTS, POST /_sandbox/webhook_faults); probabilities in [0, 1]. */
export interface WebhookFaults {
  /** An event is sent twice. */
  duplicate: number;
  /** An event is held back until a later event of its charge was delivered (or reorder_hold_ms passed). */
  reorder: number;
  /** Every event waits this long before its first delivery. */
  delayMs: number;
  /** An event is never sent (only POST /_sandbox/events/{id}/redeliver sends it). */
  loss: number;
  /** The longest a reordered event is held back. */
  reorderHoldMs: number;
}

export const noWebhookFaults: WebhookFaults = { duplicate: 0, reorder: 0, delayMs: 0, loss: 0, reorderHoldMs: 3000 };

/** What can change while the sandbox runs (in memory: a restart ends an outage and the faults). */
export interface SandboxRuntime {
  /** The sandbox's own base URL, which challenge URLs start with (known once it listens). */
  publicUrl: string;
  /** Where events go (SANDBOX_WEBHOOK_URL) and the secret they are signed with; null: events are kept, not sent. */
  webhook: { url: string; secret: string } | null;
  faults: WebhookFaults;
  outage: OutageMode;
  /** Wakes the webhook delivery loop (a new event was committed). */
  wakeDelivery: () => void;
}

export interface SandboxDeps {
  sql: Sql;
  /** The card network's database (network-attempts.ts), shared by every sandbox on the network; by default `sql`. */
  networkSql: Sql;
  config: SandboxConfig;
  runtime: SandboxRuntime;
}
