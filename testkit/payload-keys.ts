import { paymentDataConverter } from '../lib/data-converter';
import { parsePayloadKeys } from '../lib/payload-codec';

/**
 * The fixed payload key of the test suite and of the recorded histories (test/histories):
 * every test stack, test worker, replay and `npm run histories:record` encrypts with it, so
 * the committed histories are ciphertext that the replay tests can still read. A test key,
 * published on purpose: never use it anywhere else.
 */
export const TEST_PAYLOAD_KEYS = 'test-key-1:CDrrBDSFg6SKhrpobMK6ARDBRUmhI0yTmTy+Rft9fDM=';

export const testPayloadKeys = parsePayloadKeys(TEST_PAYLOAD_KEYS);

/** lib/data-converter.ts with the test key: what the tests' clients and workers use. */
export const testDataConverter = paymentDataConverter(testPayloadKeys);
