/**
 * The one data converter of every Temporal client and worker of this service (API, worker,
 * codec server, replay and history scripts, tests, benchmark): the SDK's JSON payload
 * converter, failures with their message and stack inside an encoded payload, and the
 * payload codec (lib/payload-codec.ts). The codec runs outside the workflow isolate, in the
 * client and in the worker around it; only the failure converter is bundled with the
 * workflows (pass failureConverterPath to bundleWorkflowCode).
 */
import { fileURLToPath } from 'node:url';
import type { DataConverter } from '@temporalio/common';
import { AesGcmPayloadCodec, type PayloadKey } from './payload-codec';

export const failureConverterPath = fileURLToPath(new URL('./failure-converter.cjs', import.meta.url));

/**
 * `keys` null: encryption switched off, payloads are written in clear (and encrypted ones
 * cannot be read), so switch it off only where nothing was ever written encrypted.
 */
export function paymentDataConverter(keys: readonly PayloadKey[] | null): DataConverter {
  return { failureConverterPath, ...(keys ? { payloadCodecs: [new AesGcmPayloadCodec(keys)] } : {}) };
}
