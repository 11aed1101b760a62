import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createSql } from '../../db/connect';
import { firstFolderClosedTo, installedEmbeddedPostgres, reachableEmbeddedPostgres, startEmbeddedPostgres } from '../../devstack/embedded-postgres';
import { projectRoot } from '../../devstack/temporal-cli';
import { freePort } from '../../devstack/ports';

/**
 * A clone inside a folder only its owner can enter (mode 0700, as `mktemp -d` makes it).
 * As root, the embedded PostgreSQL runs as the `postgres` user, who cannot get in. Its
 * binaries (in the clone's node_modules) are then mirrored where that user can reach them,
 * and the server runs; a data folder it cannot reach makes `npm start` stop at once and say
 * which folder and what to change, not fail deep inside initdb.
 */

const asRoot = userInfo().uid === 0;
const closed = mkdtempSync(path.join(tmpdir(), 'payorch-closed-'));
afterAll(() => rmSync(closed, { recursive: true, force: true }));

describe('a folder the postgres user cannot enter', () => {
  it('is found on the way to a binary and to the data folder, and no longer once opened (rules out a check that cannot see the 0700 parent)', () => {
    const binary = path.join(closed, 'node_modules', 'bin', 'initdb');
    mkdirSync(path.dirname(binary), { recursive: true });
    writeFileSync(binary, '');
    const dataDir = path.join(closed, '.data');
    mkdirSync(dataDir, { recursive: true, mode: 0o711 });

    const blocked = firstFolderClosedTo([binary, dataDir], 'postgres');
    expect(blocked).toMatchObject({ folder: closed, mode: 0o700, needed: binary });
    // The owner itself is let in: only another user is shut out.
    expect(firstFolderClosedTo([binary, dataDir], userInfo().username)).toBeNull();

    chmodSync(closed, 0o711);
    try {
      expect(firstFolderClosedTo([binary, dataDir], 'postgres')).toBeNull();
    } finally {
      chmodSync(closed, 0o700);
    }
  });

  it('makes `npm start` stop at once with a message naming the folder and the fix (as root) (rules out a bare EACCES from initdb)', async () => {
    const dataDir = path.join(closed, 'data');
    const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir, LOG_LEVEL: 'warn', NODE_ENV: 'development' };
    for (const name of ['DATABASE_URL', 'TEMPORAL_ADDRESS', 'PROVIDER_URL', 'ADMIN_TOKEN', 'HOST', 'TEMPORAL_UI_URL', 'FORCE_COLOR']) delete env[name];
    Object.assign(env, {
      PORT: String(await freePort()),
      SANDBOX_PORT: String(await freePort()),
      EMBEDDED_PG_PORT: String(await freePort()),
      WORKER_METRICS_PORT: String(await freePort()),
      TEMPORAL_SDK_METRICS_ADDRESS: `127.0.0.1:${await freePort()}`,
      TEMPORAL_PORT: String(await freePort()),
      TEMPORAL_UI_PORT: String(await freePort()),
    });
    if (!asRoot) {
      // Not root: PostgreSQL runs as this user, who owns the folder; nothing is in the way.
      expect(firstFolderClosedTo([dataDir], userInfo().username)).toBeNull();
      return;
    }
    const npm = spawn('npm', ['start'], { cwd: projectRoot, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    npm.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    npm.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => npm.once('exit', (code) => resolve(code)));
    const code = await Promise.race([exited, new Promise<'running'>((resolve) => setTimeout(() => resolve('running'), 90_000))]);
    if (code === 'running') {
      process.kill(-npm.pid!, 'SIGKILL');
      throw new Error(`npm start did not stop:\n${output}`);
    }
    expect(code, output).toBe(1);
    expect(output).toContain(`the "postgres" user (PostgreSQL refuses to run as root), and that user cannot enter ${closed} (mode 0700`);
    expect(output).toContain(`chmod o+x ${closed}`);
    expect(output).toContain('DATABASE_URL');
    expect(output).not.toContain('EACCES');
  });

  it('still runs the embedded PostgreSQL when its packages are inside it: as root, from a mirror the postgres user can reach (rules out binaries run from where that user cannot enter)', async () => {
    // The packages as a clone inside the closed folder has them.
    const installed = installedEmbeddedPostgres();
    const modules = path.join(closed, 'clone', 'node_modules');
    const inside = {
      mainDir: path.join(modules, path.basename(installed.mainDir)),
      platformDir: path.join(modules, path.basename(path.dirname(installed.platformDir)), path.basename(installed.platformDir)),
    };
    cpSync(installed.mainDir, inside.mainDir, { recursive: true, verbatimSymlinks: true });
    cpSync(installed.platformDir, inside.platformDir, { recursive: true, verbatimSymlinks: true });
    const initdb = path.join(inside.platformDir, 'native', 'bin', 'initdb');
    // A fresh place for the mirror, so that this test makes it rather than finds it.
    const mirrorRoot = mkdtempSync(path.join(tmpdir(), 'payorch-mirror-'));
    chmodSync(mirrorRoot, 0o755);
    const dataDir = mkdtempSync(path.join(tmpdir(), 'payorch-mirror-data-'));
    try {
      if (!asRoot) {
        // Not root: PostgreSQL runs as this user, who can reach its own folder; nothing is mirrored.
        expect(reachableEmbeddedPostgres(inside, mirrorRoot)).toMatchObject({ platformDir: inside.platformDir, mirrored: false });
        return;
      }
      expect(firstFolderClosedTo([initdb], 'postgres')).toMatchObject({ folder: closed, mode: 0o700 });
      const pg = await startEmbeddedPostgres({ dataDir, port: await freePort(), database: 'payments', packages: inside, mirrorRoot });
      try {
        // The server runs as the postgres user, from the mirror's binaries, and answers.
        const postgresUid = Number(spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).stdout.trim());
        expect(statSync(`/proc/${pg.pid}`).uid).toBe(postgresUid);
        expect(readlinkSync(`/proc/${pg.pid}/exe`).startsWith(`${mirrorRoot}/`)).toBe(true);
        const sql = createSql(pg.url, { max: 1 });
        try {
          const [row] = await sql<{ database: string }[]>`SELECT current_database() AS database`;
          expect(row?.database).toBe('payments');
        } finally {
          await sql.end();
        }
      } finally {
        await pg.stop();
      }
    } finally {
      rmSync(mirrorRoot, { recursive: true, force: true });
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 120_000);
});
