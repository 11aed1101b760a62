import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../devstack/temporal-cli';
import { fileDatabaseUrl } from '../helpers/database';
import { patchConnectionSource, patchedVersion } from '../../scripts/patch-postgres.mjs';

/**
 * postgres.js 3.4.9 as installed (scripts/patch-postgres.mjs, run by npm install): PostgreSQL
 * killing a connection in the middle of a transaction fails that transaction, and nothing
 * else: the process lives on and its next query runs. Without the mend, the driver's own
 * ROLLBACK wrote to the closed socket from a setImmediate and the process died of an
 * uncaught TypeError (`Cannot read properties of null (reading 'write')`, exit 1): a
 * PostgreSQL restart would have taken down every API and worker process in a transaction.
 */

/** Runs a transaction in a fresh Node process, has PostgreSQL terminate its backend, then queries again. */
function transactionWhoseBackendDies(databaseUrl: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const script = `
    import postgres from 'postgres';
    const url = process.env.DATABASE_URL;
    const sql = postgres(url, { max: 1, onnotice() {} });
    const killer = postgres(url, { max: 1 });
    let pid = null;
    const transaction = sql.begin(async (tx) => {
      const [row] = await tx\`SELECT pg_backend_pid() AS pid\`;
      pid = row.pid;
      await tx\`SELECT pg_sleep(5)\`;
    });
    while (pid === null) await new Promise((resolve) => setTimeout(resolve, 20));
    await killer\`SELECT pg_terminate_backend(\${pid})\`;
    console.log('transaction: ' + (await transaction.then(() => 'committed', (error) => error.code)));
    await new Promise((resolve) => setTimeout(resolve, 500));
    console.log('next query: ' + (await sql\`SELECT 1 AS one\`.then(([row]) => row.one, (error) => 'failed ' + error.code)));
    await sql.end();
    await killer.end();
  `;
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { cwd: projectRoot, env: { ...process.env, DATABASE_URL: databaseUrl } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
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

  it('is the mended driver: both builds carry the mend, applying it again changes nothing, and an unknown text is refused', () => {
    const root = path.join(projectRoot, 'node_modules', 'postgres');
    expect(JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')).version).toBe(patchedVersion);
    for (const file of ['src/connection.js', 'cjs/src/connection.js']) {
      const source = readFileSync(path.join(root, file), 'utf8');
      expect(source.match(/payment-orchestrator: scripts\/patch-postgres\.mjs/g), file).toHaveLength(3);
      expect(patchConnectionSource(source)).toBe(source);
    }
    // A driver whose text moved on (another version) is not patched blindly.
    expect(() => patchConnectionSource('function nextWrite(fn) { socket.write(chunk, fn) }')).toThrow(/no single place/);
  });
});
