import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../devstack/temporal-cli';
import { assertDriverMended, createSql, driverMend } from '../../db/connect';
import { fileDatabaseUrl } from '../helpers/database';

/**
 * postgres.js 3.4.9 as npm install leaves it (patches/postgres+3.4.9.patch, applied by the
 * postinstall): PostgreSQL killing a connection in the middle of a transaction, or refusing the
 * driver's own array types query, fails the statements concerned and nothing else: the process
 * lives on and its next query runs. Unmended, the first was an uncaught TypeError (the driver's
 * ROLLBACK written to the closed socket from a setImmediate) and the second an unhandled
 * rejection: either ended the process (exit 1), so a PostgreSQL restart took down every API and
 * worker process that was using it.
 */

interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `script` (an ES module importing the installed driver) in a fresh Node process. */
function runDriverScript(script: string, env: Record<string, string>): Promise<Outcome> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { cwd: projectRoot, env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Runs a transaction, has PostgreSQL terminate its backend, then queries again. */
function transactionWhoseBackendDies(databaseUrl: string): Promise<Outcome> {
  return runDriverScript(
    `
    import postgres from 'postgres';
    const url = process.env.DATABASE_URL;
    const sql = postgres(url, { max: 1, onnotice() {} });
    const killer = postgres(url, { max: 1 });
    let pid = null;
    // Its outcome is taken at once: the close can reach this process before the killer's answer
    // does, and a rejection with no handler yet would end the process by itself.
    const transaction = sql.begin(async (tx) => {
      const [row] = await tx\`SELECT pg_backend_pid() AS pid\`;
      pid = row.pid;
      await tx\`SELECT pg_sleep(5)\`;
    }).then(() => 'committed', (error) => error.code);
    while (pid === null) await new Promise((resolve) => setTimeout(resolve, 20));
    await killer\`SELECT pg_terminate_backend(\${pid})\`;
    console.log('transaction: ' + (await transaction));
    await new Promise((resolve) => setTimeout(resolve, 500));
    console.log('next query: ' + (await sql\`SELECT 1 AS one\`.then(([row]) => row.one, (error) => 'failed ' + error.code)));
    await sql.end();
    await killer.end();
  `,
    { DATABASE_URL: databaseUrl },
  );
}

/**
 * Connects as a role that may not read pg_catalog.pg_type, so that the array types query the
 * driver runs first on a new connection fails (as it does when the connection is lost while it
 * runs), then queries twice.
 */
function typesQueryRefused(databaseUrl: string): Promise<Outcome> {
  return runDriverScript(
    `
    import postgres from 'postgres';
    const sql = postgres(process.env.DATABASE_URL, { max: 1, onnotice() {} });
    const outcome = (query) => query.then(([row]) => row.one, (error) => 'failed ' + error.code);
    console.log('first query: ' + (await outcome(sql\`SELECT 1 AS one\`)));
    // An unhandled rejection ends the process when the microtasks and timers run.
    await new Promise((resolve) => setTimeout(resolve, 200));
    console.log('next query: ' + (await outcome(sql\`SELECT 1 AS one\`)));
    await sql.end();
  `,
    { DATABASE_URL: databaseUrl },
  );
}

const scratch: string[] = [];
afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

/** A copy of the installed driver's package.json and both builds of connection.js, at <dir>/node_modules/postgres. */
function copyOfInstalledDriver(): { dir: string; root: string } {
  const dir = mkdtempSync(path.join(tmpdir(), 'postgres-driver-'));
  scratch.push(dir);
  const installed = path.join(projectRoot, 'node_modules', 'postgres');
  const root = path.join(dir, 'node_modules', 'postgres');
  for (const file of ['package.json', ...driverMend.files]) {
    mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    cpSync(path.join(installed, file), path.join(root, file));
  }
  return { dir, root };
}

describe('postgres.js under a connection killed mid-transaction', () => {
  it('fails the transaction with CONNECTION_CLOSED, keeps the process alive, and runs the next query (rules out an uncaught TypeError ending the process)', async () => {
    const outcome = await transactionWhoseBackendDies(await fileDatabaseUrl());
    expect(outcome.stderr).not.toMatch(/TypeError/);
    expect(outcome.stdout, outcome.stderr).toContain('transaction: CONNECTION_CLOSED');
    // Not the killed backend's stale 57P01: the query runs on a new connection.
    expect(outcome.stdout, outcome.stderr).toContain('next query: 1');
    expect(outcome.code, outcome.stderr).toBe(0);
  }, 60_000);
});

describe('postgres.js when its array types query fails', () => {
  it('fails the statement that waited behind it and keeps the process alive (rules out an unhandled rejection ending the process)', async () => {
    const databaseUrl = await fileDatabaseUrl();
    const role = `no_types_${randomBytes(4).toString('hex')}`;
    // The catalog's privileges are this file's database's own; PostgreSQL roles are the cluster's.
    const admin = createSql(databaseUrl, { max: 1 });
    try {
      await admin.unsafe(`CREATE ROLE ${role} LOGIN`);
      await admin.unsafe('REVOKE SELECT ON pg_catalog.pg_type FROM PUBLIC');
      const url = new URL(databaseUrl);
      url.username = role;
      url.password = '';
      const outcome = await typesQueryRefused(url.toString());
      // The statement behind the types query reports the refusal (42501, insufficient privilege) to its caller.
      expect(outcome.stdout, outcome.stderr).toContain('first query: failed 42501');
      expect(outcome.stderr).not.toMatch(/pg_type/);
      expect(outcome.stdout, outcome.stderr).toContain('next query: 1');
      expect(outcome.code, outcome.stderr).toBe(0);
    } finally {
      await admin.unsafe('GRANT SELECT ON pg_catalog.pg_type TO PUBLIC');
      await admin.unsafe(`DROP ROLE IF EXISTS ${role}`);
      await admin.end();
    }
  }, 60_000);
});

describe('the mended driver is the one installed, and nothing starts without it', () => {
  it('is the installed driver: the patch undoes cleanly from it, and the start-up check accepts it', () => {
    assertDriverMended(path.join(projectRoot, 'node_modules', 'postgres'));
    const { dir, root } = copyOfInstalledDriver();
    // Reversing the patch checks that what is installed is exactly the patch applied.
    execFileSync('git', ['apply', '--reverse', path.join(projectRoot, driverMend.patch)], { cwd: dir });
    expect(() => assertDriverMended(root)).toThrow('postgres.js is not patched: run npm install (patches/postgres+3.4.9.patch)');
  });

  it('refuses a driver installed without the postinstall, or half mended (rules out a process that dies in the next outage)', () => {
    const { dir, root } = copyOfInstalledDriver();
    execFileSync('git', ['apply', '--reverse', '--include', 'node_modules/postgres/cjs/*', path.join(projectRoot, driverMend.patch)], { cwd: dir });
    expect(() => assertDriverMended(root)).toThrow(/^postgres\.js is not patched: run npm install \(patches\/postgres\+3\.4\.9\.patch\); .*cjs\/src\/connection\.js has 0 of its 4 mended places$/);
  });

  it('refuses another version of the driver: the patch was written for 3.4.9 only', () => {
    const { root } = copyOfInstalledDriver();
    writeFileSync(path.join(root, 'package.json'), JSON.stringify({ name: 'postgres', version: '3.4.10' }));
    expect(() => assertDriverMended(root)).toThrow(/^postgres\.js is 3\.4\.10, patches\/postgres\+3\.4\.9\.patch was written for 3\.4\.9/);
  });
});
