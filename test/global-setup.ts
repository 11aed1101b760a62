import type { TestProject } from 'vitest/node';
import { randomBytes } from 'node:crypto';
import { createSql } from '../db/connect';
import { ensureDatabase, migrate } from '../db/migrate';
import { startTemporalDevServer } from '../devstack/temporal-cli';
import { freePort } from '../devstack/ports';
import { bundleWorkflowCode } from '@temporalio/worker';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { workflowInterceptorModules, workflowsPath } from '../worker/worker';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
    temporalAddress: string;
    temporalUiUrl: string;
    workflowBundlePath: string;
  }
}

const adminUrl = process.env.TEST_DATABASE_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** One real Temporal dev server (with its UI) and one fresh, migrated database per run. */
export default async function setup(project: TestProject) {
  const dbName = `payorch_test_${randomBytes(4).toString('hex')}`;
  const admin = createSql(adminUrl, { max: 1 });
  await ensureDatabase(admin, dbName);
  const databaseUrl = adminUrl.replace(/\/[^/]*$/, `/${dbName}`);
  const sql = createSql(databaseUrl, { max: 1 });
  await migrate(sql);
  await sql.end();

  const port = await freePort();
  const uiPort = await freePort();
  const temporal = await startTemporalDevServer({ port, uiPort, headless: false });

  // Bundle the workflows once per run; every test worker loads this bundle.
  const artifacts = path.resolve('test/artifacts');
  mkdirSync(artifacts, { recursive: true });
  const workflowBundlePath = path.join(artifacts, 'workflow-bundle.js');
  const { code } = await bundleWorkflowCode({ workflowsPath, workflowInterceptorModules, logger: quietLogger });
  writeFileSync(workflowBundlePath, code);
  project.provide('workflowBundlePath', workflowBundlePath);

  project.provide('databaseUrl', databaseUrl);
  project.provide('temporalAddress', temporal.address);
  project.provide('temporalUiUrl', temporal.uiUrl ?? '');

  return async () => {
    await temporal.stop();
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
