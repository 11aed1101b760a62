import { readFileSync } from 'node:fs';
import { describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../../lib/config';
import { packageVersion, workerBuildId } from '../../worker/versioning';
import { bundleWorkflows } from '../../worker/worker';

const silent = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} };

/**
 * A worker's version (docs/versioning.md): its build id names exactly the workflow code it
 * runs, and its deployment comes from configuration.
 */
describe('the default build id', () => {
  const bundle = readFileSync(inject('workflowBundlePath'), 'utf8');

  it('is the package version and the first 12 hex digits of the bundle hash', () => {
    expect(packageVersion()).toBe(JSON.parse(readFileSync('package.json', 'utf8')).version);
    expect(workerBuildId(bundle)).toMatch(new RegExp(`^${packageVersion().replace(/\./g, '\\.')}-[0-9a-f]{12}$`));
  });

  it('is the same for the same workflow code bundled again: workers of one release share a version', async () => {
    expect(workerBuildId(await bundleWorkflows(silent))).toBe(workerBuildId(bundle));
  });

  it('changes with any change to the workflow code, even without a new package version: changed code is never run under an old version', () => {
    expect(workerBuildId(`${bundle}\n// one more line`)).not.toBe(workerBuildId(bundle));
    expect(workerBuildId(bundle, '1.0.1')).not.toBe(workerBuildId(bundle, '1.0.0'));
  });
});

describe('Worker Versioning configuration', () => {
  it('is on, in the deployment payment-orchestrator, with a derived build id, unless set', () => {
    const config = loadConfig({});
    expect(config.TEMPORAL_WORKER_VERSIONING).toBe('on');
    expect(config.TEMPORAL_DEPLOYMENT_NAME).toBe('payment-orchestrator');
    expect(config.TEMPORAL_WORKER_BUILD_ID).toBeNull();
  });

  it('takes a build id and a deployment name as given, and versioning off', () => {
    const config = loadConfig({ TEMPORAL_WORKER_BUILD_ID: '2026.12.02-abc', TEMPORAL_DEPLOYMENT_NAME: 'payments-eu', TEMPORAL_WORKER_VERSIONING: 'off' });
    expect([config.TEMPORAL_WORKER_BUILD_ID, config.TEMPORAL_DEPLOYMENT_NAME, config.TEMPORAL_WORKER_VERSIONING]).toEqual(['2026.12.02-abc', 'payments-eu', 'off']);
  });

  it("refuses a deployment name with '.' or ':' (the server's separators of a version), naming the variable", () => {
    expect(() => loadConfig({ TEMPORAL_DEPLOYMENT_NAME: 'payments.eu' })).toThrow(/TEMPORAL_DEPLOYMENT_NAME: a deployment name cannot contain/);
    expect(() => loadConfig({ TEMPORAL_DEPLOYMENT_NAME: 'payments:eu' })).toThrow(/TEMPORAL_DEPLOYMENT_NAME/);
  });
});
