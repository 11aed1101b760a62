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
 * network both sandboxes share (its count of a card's attempts in `networkDatabaseUrl`).
 */
export function sandboxEnvironment(common: NodeJS.ProcessEnv, sandbox: SupervisedSandbox, networkDatabaseUrl: string): NodeJS.ProcessEnv {
  return {
    ...common,
    DATABASE_URL: sandbox.databaseUrl,
    SANDBOX_PORT: String(sandbox.port),
    SANDBOX_HOST: sandbox.host,
    SANDBOX_WEBHOOK_URL: sandbox.webhookUrl,
    SANDBOX_WEBHOOK_SECRET: sandbox.secret,
    // One card network for both: its count of a card's attempts lives in sandbox-a's database.
    SANDBOX_NETWORK_DATABASE_URL: networkDatabaseUrl,
  };
}
