import type { Config } from '../lib/config';

/**
 * The sandboxes' card network's time scale under `npm start`: RECOVERY_TIME_SCALE. A
 * SANDBOX_NETWORK_TIME_SCALE in the environment that differs from it is refused (thrown, naming
 * both: the supervisor checks it before it starts anything).
 */
export function networkTimeScale(env: NodeJS.ProcessEnv, config: Pick<Config, 'RECOVERY_TIME_SCALE'>): number {
  const scale = config.RECOVERY_TIME_SCALE;
  const asked = env.SANDBOX_NETWORK_TIME_SCALE;
  if (asked !== undefined && asked !== '' && Number(asked) !== scale) {
    throw new Error(
      `SANDBOX_NETWORK_TIME_SCALE=${asked} differs from RECOVERY_TIME_SCALE=${scale}: npm start runs the sandboxes' card network at RECOVERY_TIME_SCALE; set that one alone`,
    );
  }
  return scale;
}

/** One sandbox PSP as `npm start` runs it (devstack/supervisor.ts). */
export interface SupervisedSandbox {
  port: number;
  host: string;
  databaseUrl: string;
  webhookUrl: string;
  secret: string;
}

/**
 * The environment `npm start`'s supervisor gives a sandbox PSP (sandbox/main.ts): the common
 * environment of every child, with the sandbox's own database, address and webhook, and the card
 * network both sandboxes share (its count of a card's attempts in `networkDatabaseUrl`), whose
 * durations run at the stack's RECOVERY_TIME_SCALE: one setting scales revenue recovery's schedule
 * (the API) and the network's advice waits and windows (the sandboxes) alike, so a retry the
 * schedule makes is never "too early" by the network's clock (networkTimeScale).
 */
export function sandboxEnvironment(common: NodeJS.ProcessEnv, sandbox: SupervisedSandbox, networkDatabaseUrl: string, config: Pick<Config, 'RECOVERY_TIME_SCALE'>): NodeJS.ProcessEnv {
  const scale = networkTimeScale(common, config);
  return {
    ...common,
    DATABASE_URL: sandbox.databaseUrl,
    SANDBOX_PORT: String(sandbox.port),
    SANDBOX_HOST: sandbox.host,
    SANDBOX_WEBHOOK_URL: sandbox.webhookUrl,
    SANDBOX_WEBHOOK_SECRET: sandbox.secret,
    // One card network for both: its count of a card's attempts lives in sandbox-a's database.
    SANDBOX_NETWORK_DATABASE_URL: networkDatabaseUrl,
    SANDBOX_NETWORK_TIME_SCALE: String(scale),
  };
}
