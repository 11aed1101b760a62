/**
 * How every process reaches Temporal: the address plus, for a cluster with mTLS or for
 * Temporal Cloud, TLS and an API key. Read from the environment (TEMPORAL_ADDRESS,
 * TEMPORAL_TLS_CERT/TEMPORAL_TLS_KEY, TEMPORAL_TLS_CA, TEMPORAL_TLS_SERVER_NAME, TEMPORAL_TLS,
 * TEMPORAL_API_KEY); the same options serve the client (Connection) and the worker
 * (NativeConnection).
 */
import { readFileSync } from 'node:fs';
import type { TLSConfig } from '@temporalio/client';

export interface TemporalConnectionSettings {
  address: string;
  tls?: TLSConfig | true;
  apiKey?: string;
}

export interface TemporalConnectionEnv {
  TEMPORAL_ADDRESS: string;
  TEMPORAL_TLS_CERT?: string | null | undefined;
  TEMPORAL_TLS_KEY?: string | null | undefined;
  TEMPORAL_TLS_CA?: string | null | undefined;
  TEMPORAL_TLS_SERVER_NAME?: string | null | undefined;
  TEMPORAL_TLS?: boolean | undefined;
  TEMPORAL_API_KEY?: string | null | undefined;
}

const read = (file: string, variable: string): Buffer => {
  try {
    return readFileSync(file);
  } catch (error) {
    throw new Error(`${variable}=${file} cannot be read: ${(error as Error).message}`);
  }
};

/**
 * mTLS when a client certificate is given (its CA from TEMPORAL_TLS_CA, else the system's
 * roots); plain TLS when only a CA, TEMPORAL_TLS=true or an API key is given (Temporal
 * Cloud's API keys are only accepted over TLS); otherwise plaintext, as the dev server and a
 * cluster on loopback speak.
 */
export function temporalConnectionSettings(env: TemporalConnectionEnv): TemporalConnectionSettings {
  if (Boolean(env.TEMPORAL_TLS_CERT) !== Boolean(env.TEMPORAL_TLS_KEY)) {
    throw new Error('TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY go together (a client certificate and its key)');
  }
  const tls: TLSConfig = {
    ...(env.TEMPORAL_TLS_CERT && env.TEMPORAL_TLS_KEY
      ? { clientCertPair: { crt: read(env.TEMPORAL_TLS_CERT, 'TEMPORAL_TLS_CERT'), key: read(env.TEMPORAL_TLS_KEY, 'TEMPORAL_TLS_KEY') } }
      : {}),
    ...(env.TEMPORAL_TLS_CA ? { serverRootCACertificate: read(env.TEMPORAL_TLS_CA, 'TEMPORAL_TLS_CA') } : {}),
    ...(env.TEMPORAL_TLS_SERVER_NAME ? { serverNameOverride: env.TEMPORAL_TLS_SERVER_NAME } : {}),
  };
  const useTls = Object.keys(tls).length > 0 || env.TEMPORAL_TLS === true || Boolean(env.TEMPORAL_API_KEY);
  return {
    address: env.TEMPORAL_ADDRESS,
    ...(useTls ? { tls: Object.keys(tls).length > 0 ? tls : true } : {}),
    ...(env.TEMPORAL_API_KEY ? { apiKey: env.TEMPORAL_API_KEY } : {}),
  };
}

/** For logs and the banner: what kind of connection this is, without any secret. */
export function describeTemporalConnection(settings: TemporalConnectionSettings): string {
  const tls = settings.tls === undefined ? 'plaintext' : typeof settings.tls === 'object' && settings.tls.clientCertPair ? 'mTLS' : 'TLS';
  return `${settings.address} (${tls}${settings.apiKey ? ', API key' : ''})`;
}
