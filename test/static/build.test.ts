import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../devstack/temporal-cli';
import { fileDatabaseUrl } from '../helpers/database';

/**
 * `npm run build` makes what production runs (Dockerfile, docker-compose.yml): plain
 * JavaScript in dist/ that Node loads without tsx, with the files it reads at run time.
 */

const run = promisify(execFile);
const dist = path.join(projectRoot, 'dist');
/** Runs a snippet as an ES module with plain node (no tsx loader) from the project root. */
const node = (script: string, env: NodeJS.ProcessEnv = {}) =>
  run(process.execPath, ['--input-type=module', '-e', script], { cwd: projectRoot, env: { ...process.env, ...env, NODE_OPTIONS: '' }, timeout: 60_000 });

beforeAll(async () => {
  await run('npm', ['run', 'build'], { cwd: projectRoot, timeout: 170_000, maxBuffer: 16 * 1024 * 1024 });
}, 180_000);

describe('npm run build', () => {
  it('compiles every process so that plain node can load it (rules out an import Node cannot resolve without tsx)', async () => {
    const modules = ['dist/api/app.js', 'dist/worker/process.js', 'dist/db/migrate.js', 'dist/sandbox/server.js'];
    const { stdout } = await node(`for (const m of ${JSON.stringify(modules)}) { await import('./' + m); } console.log('loaded');`);
    expect(stdout.trim()).toBe('loaded');
  });

  it('puts the workflow bundle where the compiled worker loads it, and the /docs script beside the API (rules out a worker bundling at start or an empty /docs)', async () => {
    expect(existsSync(path.join(dist, 'workflow-bundle.js'))).toBe(true);
    expect(existsSync(path.join(dist, 'api', 'scalar-standalone.js'))).toBe(true);
    const { stdout } = await node(`const w = await import('./dist/worker/worker.js'); console.log(w.prebuiltWorkflowBundlePath);`);
    expect(stdout.trim()).toBe(path.join(dist, 'workflow-bundle.js'));
  });

  it('carries the migrations, and the compiled migrate command checks them against a database (rules out a schema job with no SQL files)', async () => {
    expect(readdirSync(path.join(dist, 'db', 'migrations')).sort()).toEqual(readdirSync(path.join(projectRoot, 'db', 'migrations')).sort());
    const { stdout } = await run(process.execPath, ['dist/db/main.js'], {
      cwd: projectRoot,
      env: { ...process.env, DATABASE_URL: await fileDatabaseUrl(), NODE_OPTIONS: '' },
      timeout: 60_000,
    });
    expect(stdout).toContain('schema up to date');
  });
});
