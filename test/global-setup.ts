import type { ProvidedContext } from 'vitest';
import type { TestProject } from 'vitest/node';
import { randomBytes } from 'node:crypto';
import { createSql } from '../db/connect';
import { ensureDatabase, migrate } from '../db/migrate';
import { startTemporalDevServer } from '../devstack/temporal-cli';
import { ensureClusterBinaries, startTemporalCluster } from '../devstack/temporal-cluster';
import { freePort } from '../devstack/ports';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { bundleWorkflows } from '../worker/worker';
import { startCodecServer } from '../lib/codec-server';
import { AesGcmPayloadCodec } from '../lib/payload-codec';
import { testPayloadKeys } from '../testkit/payload-keys';

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
 * One real Temporal (with its UI) and one fresh, migrated database per run (`databaseUrl`),
 * plus an untouched copy of it (`templateDatabaseUrl`, nobody connects) from which each test
 * file makes its own (test/helpers/database.ts). TEMPORAL_MODE picks the Temporal: `dev`
 * (default) a dev server; `cluster` a two-node cluster of the production server on this
 * PostgreSQL, in databases of its own (dropped afterwards); `external` none: TEMPORAL_ADDRESS
 * (plaintext; the namespace and search attributes must exist).
 */
export default async function setup(project: TestProject) {
  // vitest calls this once per project (vitest.config.ts: the root config and its two groups),
  // in one process: the first call starts the run's Temporal and database, the others share them.
  const shared = globalThis as { payorchRun?: { users: number; run: Promise<RunResources> } };
  shared.payorchRun ??= { users: 0, run: startRun() };
  const state = shared.payorchRun;
  state.users++;
  const run = await state.run;
  for (const [key, value] of Object.entries(run.provided)) project.provide(key as keyof ProvidedContext, value);
  return async () => {
    if (--state.users === 0) await run.teardown();
  };
}

interface RunResources {
  provided: ProvidedContext;
  teardown(): Promise<void>;
}

async function startRun(): Promise<RunResources> {
  const dbName = `payorch_test_${randomBytes(4).toString('hex')}`;
  const admin = createSql(adminUrl, { max: 1 });
  await ensureDatabase(admin, dbName);
  const databaseUrl = adminUrl.replace(/\/[^/]*$/, `/${dbName}`);
  const sql = createSql(databaseUrl, { max: 1 });
  await migrate(sql);
  await sql.end();
  const templateName = `${dbName}_template`;
  await admin.unsafe(`CREATE DATABASE ${templateName} TEMPLATE ${dbName}`);

  // The cluster suite (test/cluster/) and TEMPORAL_MODE=cluster need the production server's
  // binaries, which npm install does not build: they are built here on first use, once per
  // run (not in a test file's hook, under its timeout, or twice by two files in parallel),
  // and only for a run that needs them: TEMPORAL_MODE=cluster, the whole suite (npm run test:all, CI),
  // or files named on the command line that include test/cluster/. A no-op when present.
  const mode = process.env.TEMPORAL_MODE ?? 'dev';
  if (mode === 'cluster' || runIncludesClusterTests(process.argv.slice(2))) {
    try {
      ensureClusterBinaries();
    } catch (error) {
      console.warn(`the cluster tests will fail: ${(error as Error).message}`);
    }
  }
  const uiPort = await freePort();
  // The Web UI shows decoded payloads through this codec server, as under npm start.
  const codec = await startCodecServer({
    codec: new AesGcmPayloadCodec(testPayloadKeys),
    token: null,
    allowedOrigins: [`http://127.0.0.1:${uiPort}`, `http://localhost:${uiPort}`],
    port: await freePort(),
  });
  const temporalDatabases = [`${dbName}_temporal`, `${dbName}_temporal_visibility`] as const;
  const temporal =
    mode === 'external'
      ? { address: process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233', uiUrl: process.env.TEMPORAL_UI_URL ?? null, stop: async () => {} }
      : mode === 'cluster'
        ? await startTemporalCluster({
            postgresUrl: adminUrl,
            databaseName: temporalDatabases[0],
            visibilityDatabaseName: temporalDatabases[1],
            uiPort,
            uiCodecEndpoint: codec.url,
            dataDir: path.resolve('test/artifacts', `cluster-${dbName}`),
          })
        : await startTemporalDevServer({ port: await freePort(), uiPort, headless: false, uiCodecEndpoint: codec.url });

  // Bundle the workflows once per run, as `npm run build` does; every test worker loads this bundle.
  const artifacts = path.resolve('test/artifacts');
  mkdirSync(artifacts, { recursive: true });
  const workflowBundlePath = path.join(artifacts, 'workflow-bundle.js');
  writeFileSync(workflowBundlePath, await bundleWorkflows(quietLogger));

  const provided: ProvidedContext = {
    workflowBundlePath,
    databaseUrl,
    templateDatabaseUrl: adminUrl.replace(/\/[^/]*$/, `/${templateName}`),
    temporalAddress: temporal.address,
    temporalUiUrl: temporal.uiUrl ?? '',
    codecUrl: codec.url,
  };
  const teardown = async () => {
    await temporal.stop();
    await codec.close();
    // The template and the test files' own copies (test/helpers/database.ts), then the shared one.
    const copies = await admin<{ datname: string }[]>`SELECT datname FROM pg_database WHERE datname LIKE ${`${dbName}\\_%`}`;
    for (const { datname } of copies) await admin.unsafe(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`);
    await admin.unsafe(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    if (mode === 'cluster') for (const name of temporalDatabases) await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  };
  return { provided, teardown };
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

/** The projects (vitest.config.ts) whose files include test/cluster/. */
const projectsWithClusterFiles = ['slow', 'alone'];

/**
 * Whether a vitest command line runs any of test/cluster/: every file runs unless `--project`
 * picks only projects without them (`npm test` runs `quick`); a file filter matches the way
 * vitest matches it (a substring of the path).
 */
export function runIncludesClusterTests(argv: string[]): boolean {
  const afterRun = argv[0] === 'run' || argv[0] === 'watch' ? argv.slice(1) : argv;
  const filters: string[] = [];
  const projects: string[] = [];
  for (let i = 0; i < afterRun.length; i++) {
    const arg = afterRun[i]!;
    if (arg === '--project' || arg.startsWith('--project=')) {
      const value = arg === '--project' ? afterRun[++i] : arg.slice('--project='.length);
      if (value !== undefined) projects.push(value);
      continue;
    }
    if (arg.startsWith('-')) {
      // Options that take a value as the next word (-t name, --config c, ...) do not filter files.
      if (!arg.includes('=') && ['-t', '--testNamePattern', '--config', '-c', '--root', '-r', '--dir', '--reporter', '--outputFile', '--maxWorkers', '--shard', '--mode', '--exclude'].includes(arg)) i++;
      continue;
    }
    filters.push(arg);
  }
  // A pattern (--project 'sl*') is not resolved here: it may pick them.
  if (projects.length > 0 && !projects.some((p) => p.includes('*') || projectsWithClusterFiles.includes(p))) return false;
  if (filters.length > 0) return filters.some((f) => 'test/cluster/'.includes(f) || f.includes('test/cluster'));
  return true;
}
