import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { createSql } from '../db/connect';
import { createSandboxApp } from './app';
import { migrateSandbox } from './migrate';

export interface StartSandboxOptions {
  databaseUrl: string;
  /** 0 picks a free port. */
  port?: number;
  host?: string;
  slowMs?: number;
  flakyFailures?: number;
  /** Forget idempotency keys after this many seconds (as Stripe does after 24 hours); never when omitted. */
  idempotencyKeyTtlSeconds?: number | null;
}

export interface RunningSandbox {
  url: string;
  close(): Promise<void>;
}

/** Migrates the sandbox schema and serves the sandbox; used by main.ts, tests and the dev launcher. */
export async function startSandbox(options: StartSandboxOptions): Promise<RunningSandbox> {
  // Its own pool: 20 concurrent same-key requests each hold a connection while they wait
  // for the winner's commit, so a pool that small would only queue them, never deadlock.
  const sql = createSql(options.databaseUrl, { max: 20, applicationName: 'payment-sandbox' });
  try {
    await migrateSandbox(sql);
  } catch (error) {
    await sql.end();
    throw error;
  }

  const app = createSandboxApp({
    sql,
    config: { slowMs: options.slowMs ?? 3000, flakyFailures: options.flakyFailures ?? 2, idempotencyKeyTtlSeconds: options.idempotencyKeyTtlSeconds ?? null },
  });
  const host = options.host ?? '127.0.0.1';
  const server = await new Promise<Server>((resolve, reject) => {
    const s = serve({ fetch: app.fetch, port: options.port ?? 4010, hostname: host }, () => resolve(s as Server));
    s.once('error', reject);
  });
  const { port } = server.address() as AddressInfo;
  const urlHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;

  return {
    url: `http://${urlHost}:${port}`,
    async close() {
      await new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        // Held-open lost responses would keep close() waiting forever; dropping the
        // sockets aborts them, exactly as a crash of a real PSP would.
        server.closeAllConnections();
      });
      await sql.end({ timeout: 5 });
    },
  };
}
