import { describe, expect, it } from 'vitest';
import { sandboxEnvironment } from '../../devstack/sandbox-environment';
import { loadConfig } from '../../lib/config';

/**
 * Under `npm start` one setting scales revenue recovery at both ends: RECOVERY_TIME_SCALE (read
 * by the API, which schedules the retries) reaches the sandboxes' card network as its
 * SANDBOX_NETWORK_TIME_SCALE (advice waits, the 24-hour and 30-day windows), so a retry the
 * schedule makes after a scaled "hour" is not "too early" by the network's clock.
 */

const sandbox = { port: 4010, host: '127.0.0.1', databaseUrl: 'postgres://127.0.0.1:5433/payments', webhookUrl: 'http://127.0.0.1:3000/provider_webhooks/sandbox-a', secret: 'a-secret-of-24-characters' };
const network = 'postgres://127.0.0.1:5433/payments';

/** What the supervisor gives a sandbox from the environment `npm start` was run with. */
function sandboxGets(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const config = loadConfig({ ...env, ADMIN_TOKEN: 'an-admin-token-of-32-characters-x' });
  return sandboxEnvironment({ ...env }, sandbox, network, config);
}

describe("the sandboxes' card network runs at npm start's RECOVERY_TIME_SCALE", () => {
  it('RECOVERY_TIME_SCALE=0.000277 reaches each sandbox as SANDBOX_NETWORK_TIME_SCALE=0.000277', () => {
    expect(sandboxGets({ RECOVERY_TIME_SCALE: '0.000277' })).toMatchObject({ RECOVERY_TIME_SCALE: '0.000277', SANDBOX_NETWORK_TIME_SCALE: '0.000277' });
  });

  it('unset, both run at real time (1)', () => {
    expect(sandboxGets({}).SANDBOX_NETWORK_TIME_SCALE).toBe('1');
  });

  it('SANDBOX_NETWORK_TIME_SCALE the same as RECOVERY_TIME_SCALE is taken; a different one is refused at start-up, naming both', () => {
    expect(sandboxGets({ RECOVERY_TIME_SCALE: '0.001', SANDBOX_NETWORK_TIME_SCALE: '0.001' }).SANDBOX_NETWORK_TIME_SCALE).toBe('0.001');
    expect(() => sandboxGets({ SANDBOX_NETWORK_TIME_SCALE: '0.000277' })).toThrow(/SANDBOX_NETWORK_TIME_SCALE=0\.000277.*RECOVERY_TIME_SCALE=1/);
    expect(() => sandboxGets({ RECOVERY_TIME_SCALE: '0.000277', SANDBOX_NETWORK_TIME_SCALE: '1' })).toThrow(/RECOVERY_TIME_SCALE=0\.000277/);
  });

  it('the rest of the sandbox’s environment is its own, over the common one', () => {
    expect(sandboxGets({ DATABASE_URL: 'postgres://elsewhere/x', LOG_LEVEL: 'debug' })).toMatchObject({
      DATABASE_URL: sandbox.databaseUrl,
      SANDBOX_PORT: '4010',
      SANDBOX_HOST: '127.0.0.1',
      SANDBOX_WEBHOOK_URL: sandbox.webhookUrl,
      SANDBOX_WEBHOOK_SECRET: sandbox.secret,
      SANDBOX_NETWORK_DATABASE_URL: network,
      LOG_LEVEL: 'debug',
    });
  });
});
