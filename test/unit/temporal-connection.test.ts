import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config';
import { describeTemporalConnection, temporalConnectionSettings } from '../../lib/temporal-connection';

/** How TEMPORAL_* variables become the API's and worker's connection options (external mode, Temporal Cloud). */

const dir = mkdtempSync(path.join(tmpdir(), 'payorch-tls-'));
const file = (name: string, content: string) => {
  writeFileSync(path.join(dir, name), content);
  return path.join(dir, name);
};
const cert = file('client.pem', 'CERT');
const key = file('client.key', 'KEY');
const ca = file('ca.pem', 'CA');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('Temporal connection settings', () => {
  it('is plaintext with only an address (dev server, local cluster)', () => {
    const settings = temporalConnectionSettings(loadConfig({ TEMPORAL_ADDRESS: '127.0.0.1:7233' }));
    expect(settings).toEqual({ address: '127.0.0.1:7233' });
    expect(describeTemporalConnection(settings)).toBe('127.0.0.1:7233 (plaintext)');
  });

  it('is mTLS with a client certificate, its key, the CA and the server name', () => {
    const settings = temporalConnectionSettings(
      loadConfig({ TEMPORAL_ADDRESS: 'temporal.internal:7233', TEMPORAL_TLS_CERT: cert, TEMPORAL_TLS_KEY: key, TEMPORAL_TLS_CA: ca, TEMPORAL_TLS_SERVER_NAME: 'temporal' }),
    );
    expect(settings).toEqual({
      address: 'temporal.internal:7233',
      tls: { clientCertPair: { crt: Buffer.from('CERT'), key: Buffer.from('KEY') }, serverRootCACertificate: Buffer.from('CA'), serverNameOverride: 'temporal' },
    });
    expect(describeTemporalConnection(settings)).toBe('temporal.internal:7233 (mTLS)');
  });

  it('uses TLS with the system roots and the key for a Temporal Cloud API key', () => {
    const settings = temporalConnectionSettings(loadConfig({ TEMPORAL_ADDRESS: 'eu.aws.api.temporal.io:7233', TEMPORAL_API_KEY: 'secret-key' }));
    expect(settings).toEqual({ address: 'eu.aws.api.temporal.io:7233', tls: true, apiKey: 'secret-key' });
    expect(describeTemporalConnection(settings)).not.toContain('secret-key');
  });

  it('refuses a certificate without its key, and a file it cannot read, with the variable named', () => {
    expect(() => loadConfig({ TEMPORAL_TLS_CERT: cert })).toThrow(/TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY go together/);
    expect(() => temporalConnectionSettings(loadConfig({ TEMPORAL_TLS_CERT: path.join(dir, 'missing.pem'), TEMPORAL_TLS_KEY: key }))).toThrow(/TEMPORAL_TLS_CERT=.*missing\.pem cannot be read/);
    expect(() => loadConfig({ TEMPORAL_MODE: 'production' })).toThrow(/TEMPORAL_MODE/);
  });
});
