/**
 * `npm run rolling-upgrade`: deploys the code now on disk to a running `npm start` stack while
 * it keeps serving (docs/versioning.md). New workers start beside the old ones; if the
 * workflow bundle changed they are a new Worker Deployment Version, which ramps (a share of
 * new runs), becomes current, and the old version's workers stay until the runs pinned to it
 * have closed (the server reports it drained); then every API process is replaced. It signals
 * the supervisor (SIGUSR2, devstack/supervisor.ts) named by DATA_DIR/supervisor.pid, prints
 * the progress it writes to DATA_DIR/rolling-upgrade.json, and exits 0 once every old process
 * is gone. Draining waits as long as the old version has open runs (a payment waiting for its
 * capture keeps it for up to its window); Ctrl-C here leaves the supervisor carrying on.
 *
 * Environment (optional): TEMPORAL_WORKER_BUILD_ID (the new workers' build id; default derived
 * from the workflow bundle), ROLLING_UPGRADE_RAMP_PERCENT (20) and ROLLING_UPGRADE_RAMP_SECONDS
 * (10): the ramp before the new version becomes current (0: straight to current).
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { projectRoot } from '../devstack/temporal-cli';

const dataDir = process.env.DATA_DIR ? path.resolve(process.env.DATA_DIR) : path.join(projectRoot, '.data');
const pidFile = path.join(dataDir, 'supervisor.pid');
const statusFile = path.join(dataDir, 'rolling-upgrade.json');
const requestFile = path.join(dataDir, 'rolling-upgrade-request.json');
if (!existsSync(pidFile)) {
  console.error(`no running stack: ${pidFile} is missing (is \`npm start\` running with DATA_DIR=${dataDir}?)`);
  process.exit(1);
}
const pid = Number(readFileSync(pidFile, 'utf8').trim());
const number = (name: string): number | undefined => {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return undefined;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0) {
    console.error(`${name}: expected a number ≥ 0, got ${raw}`);
    process.exit(1);
  }
  return value;
};
const request = {
  ...(process.env.TEMPORAL_WORKER_BUILD_ID ? { buildId: process.env.TEMPORAL_WORKER_BUILD_ID } : {}),
  ...(number('ROLLING_UPGRADE_RAMP_PERCENT') !== undefined ? { rampPercent: number('ROLLING_UPGRADE_RAMP_PERCENT') } : {}),
  ...(number('ROLLING_UPGRADE_RAMP_SECONDS') !== undefined ? { rampSeconds: number('ROLLING_UPGRADE_RAMP_SECONDS') } : {}),
};
rmSync(statusFile, { force: true });
writeFileSync(requestFile, JSON.stringify(request, null, 2));
try {
  process.kill(pid, 'SIGUSR2');
} catch (error) {
  console.error(`the supervisor (pid ${pid}) is not running: ${(error as Error).message}`);
  process.exit(1);
}
console.log(`asked the supervisor (pid ${pid}) for a rolling upgrade${request.buildId ? ` to build id ${request.buildId}` : ''}; following ${statusFile}`);

interface Status {
  status: 'running' | 'done' | 'failed';
  phase?: string;
  version?: string;
  drainage?: string;
  openPinnedRuns?: number;
  replaced: string[];
  error?: string;
}
let lastLine = '';
for (;;) {
  const outcome = existsSync(statusFile) ? (JSON.parse(readFileSync(statusFile, 'utf8')) as Status) : null;
  if (outcome?.status === 'running') {
    const line = [outcome.phase, outcome.version, outcome.drainage, outcome.openPinnedRuns !== undefined ? `${outcome.openPinnedRuns} open pinned run(s)` : undefined].filter((p) => p !== undefined).join(' ');
    if (line !== lastLine) console.log(`  ${line}`);
    lastLine = line;
  } else if (outcome) {
    for (const step of outcome.replaced) console.log(`  replaced ${step}`);
    if (outcome.status === 'done') {
      console.log(`rolling upgrade done${outcome.version ? ` (current version ${outcome.version})` : ''}`);
      process.exit(0);
    }
    console.error(`rolling upgrade failed: ${outcome.error}`);
    process.exit(1);
  }
  try {
    process.kill(pid, 0);
  } catch {
    console.error(`the supervisor (pid ${pid}) is gone before the upgrade finished; see its output`);
    process.exit(1);
  }
  await new Promise((r) => setTimeout(r, 500));
}
