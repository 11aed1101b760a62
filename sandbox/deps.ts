import type { Sql } from '../db/connect';

/** What the sandbox's app and routes are built from (apart from the app, so the routes do not import it). */
export interface SandboxConfig {
  /** How long pm_card_slow takes to answer. */
  slowMs: number;
  /** How many attempts of one key pm_card_flaky fails with 503 before it succeeds. */
  flakyFailures: number;
}

export interface SandboxDeps {
  sql: Sql;
  config: SandboxConfig;
}
