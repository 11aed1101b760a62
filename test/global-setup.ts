import type { TestProject } from 'vitest/node';
import { randomBytes } from 'node:crypto';
import { createSql } from '../db/connect';
import { ensureDatabase, migrate } from '../db/migrate';
import { startTemporalDevServer } from '../devstack/temporal-cli';
import { freePort } from '../devstack/ports';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { bundleWorkflows } from '../worker/worker';
import { startCodecServer } from '../lib/codec-server';
import { AesGcmPayloadCodec } from '../lib/payload-codec';
import { testPayloadKeys } from './helpers/payload-keys';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
    templateDatabaseUrl: string;
    temporalAddress: string;
    temporalUiUrl: string;
    /** The codec server the run's Web UI is configured with (test key, no token). */
    codecUrl: string;
    workflowBundlePath: string;
  }
}

const adminUrl = process.env.TEST_DATABASE_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/**
 * One real Temporal dev server (with its UI) and one fresh, migrated database per run
 * (`databaseUrl`), plus an untouched copy of it (`templateDatabaseUrl`, nobody connects) from
 * which each test file makes its own (test/helpers/database.ts).
 */
export default async function setup(project: TestProject) {
  const dbName = `payorch_test_${randomBytes(4).toString('hex')}`;
  const admin = createSql(adminUrl, { max: 1 });
  await ensureDatabase(admin, dbName);
  const databaseUrl = adminUrl.replace(/\/[^/]*$/, `/${dbName}`);
  const sql = createSql(databaseUrl, { max: 1 });
  await migrate(sql);
  await sql.end();
  const templateName = `${dbName}_template`;
  await admin.unsafe(`CREATE DATABASE ${templateName} TEMPLATE ${dbName}`);

  const port = await freePort();
  const uiPort = await freePort();
  // The Web UI shows decoded payloads through this codec server, as under npm start.
  const codec = await startCodecServer({
    codec: new AesGcmPayloadCodec(testPayloadKeys),
    token: null,
    allowedOrigins: [`http://127.0.0.1:${uiPort}`, `http://localhost:${uiPort}`],
    port: await freePort(),
  });
  const temporal = await startTemporalDevServer({ port, uiPort, headless: false, uiCodecEndpoint: codec.url });

  // Bundle the workflows once per run, as `npm run build` does; every test worker loads this bundle.
  const artifacts = path.resolve('test/artifacts');
  mkdirSync(artifacts, { recursive: true });
  const workflowBundlePath = path.join(artifacts, 'workflow-bundle.js');
  writeFileSync(workflowBundlePath, await bundleWorkflows(quietLogger));
  project.provide('workflowBundlePath', workflowBundlePath);

  project.provide('databaseUrl', databaseUrl);
  project.provide('templateDatabaseUrl', adminUrl.replace(/\/[^/]*$/, `/${templateName}`));
  project.provide('temporalAddress', temporal.address);
  project.provide('temporalUiUrl', temporal.uiUrl ?? '');
  project.provide('codecUrl', codec.url);

  return async () => {
    await temporal.stop();
    await codec.close();
    // The template and the test files' own copies (test/helpers/database.ts), then the shared one.
    const copies = await admin<{ datname: string }[]>`SELECT datname FROM pg_database WHERE datname LIKE ${`${dbName}\\_%`}`;
    for (const { datname } of copies) await admin.unsafe(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`);
    await admin.unsafe(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.end();
  };
}

const quietLogger = {
  log() {},
  trace() {},
  debug() {},
  info() {},
  warn(message: string, meta?: unknown) {
    console.warn(message, meta ?? '');
  },
  error(message: string, meta?: unknown) {
    console.error(message, meta ?? '');
  },
};
