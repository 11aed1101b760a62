/**
 * `npm run rolling-upgrade`: replaces the worker and API processes of a running `npm start`
 * stack one at a time with the code now on disk, while it keeps serving. It signals the
 * supervisor (SIGUSR2, devstack/supervisor.ts) named by DATA_DIR/supervisor.pid and waits for
 * the outcome it writes to DATA_DIR/rolling-upgrade.json. Exit code 0 when every process was
 * replaced. Workflow code changes must be behind `patched()` (README, "Rolling upgrades").
 */
import { existsSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { projectRoot } from '../devstack/temporal-cli';

const dataDir = process.env.DATA_DIR ? path.resolve(process.env.DATA_DIR) : path.join(projectRoot, '.data');
const pidFile = path.join(dataDir, 'supervisor.pid');
const statusFile = path.join(dataDir, 'rolling-upgrade.json');
if (!existsSync(pidFile)) {
  console.error(`no running stack: ${pidFile} is missing (is \`npm start\` running with DATA_DIR=${dataDir}?)`);
  process.exit(1);
}
const pid = Number(readFileSync(pidFile, 'utf8').trim());
rmSync(statusFile, { force: true });
try {
  process.kill(pid, 'SIGUSR2');
} catch (error) {
  console.error(`the supervisor (pid ${pid}) is not running: ${(error as Error).message}`);
  process.exit(1);
}
console.log(`asked the supervisor (pid ${pid}) for a rolling upgrade; waiting for ${statusFile}`);
const deadline = Date.now() + 15 * 60_000;
for (;;) {
  if (existsSync(statusFile)) {
    const outcome = JSON.parse(readFileSync(statusFile, 'utf8')) as { status: string; replaced: string[]; error?: string };
    for (const step of outcome.replaced) console.log(`  replaced ${step}`);
    if (outcome.status === 'done') {
      console.log('rolling upgrade done');
      process.exit(0);
    }
    console.error(`rolling upgrade failed: ${outcome.error}`);
    process.exit(1);
  }
  if (Date.now() > deadline) {
    console.error('no outcome within 15 minutes; see the supervisor output');
    process.exit(1);
  }
  await new Promise((r) => setTimeout(r, 500));
}
