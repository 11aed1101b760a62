import { afterEach, describe, expect, it } from 'vitest';
import { cleanUpLaunches, launchStart, runEntryToExit } from '../helpers/launch';

/**
 * A PSP whose kind is missing or not one this build lists stops the API, the worker and
 * `npm start` at start, with a message naming the PSP: no process runs a PSP as some other kind.
 * (The parse itself: test/unit/provider-registry.test.ts.)
 */

afterEach(cleanUpLaunches, 120_000);

const unknownKind = {
  env: { PROVIDERS: 'sandbox-a=sandbox:http://127.0.0.1:4010,worldpay=worldpay:http://127.0.0.1:9' },
  message: 'invalid configuration: PROVIDERS: provider "worldpay": unknown kind "worldpay" (known kinds: adyen, sandbox, stripe)',
};
const missingKind = {
  env: { PROVIDERS: 'adyen=http://127.0.0.1:9' },
  message: 'invalid configuration: PROVIDERS: provider "adyen": no kind given; write adyen=<kind>:<url> (known kinds: adyen, sandbox, stripe)',
};

describe('a PSP of an unknown or missing kind stops the process at start', () => {
  for (const script of ['api/main.ts', 'worker/main.ts']) {
    it(`${script}: an unknown kind and a missing kind each exit non-zero, naming the PSP`, async () => {
      for (const { env, message } of [unknownKind, missingKind]) {
        const exit = await runEntryToExit(script, env);
        expect(exit.signal, exit.output).toBeNull();
        expect(exit.code, exit.output).not.toBe(0);
        expect(exit.output).toContain(message);
      }
    });
  }

  it('npm start: refuses an unknown kind before it starts anything', async () => {
    const launch = await launchStart(unknownKind.env);
    const exit = await launch.exited;
    expect(exit.code, launch.output()).toBe(1);
    expect(launch.output()).toContain(`start-up failed: ${unknownKind.message}`);
  });
});
