import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import type { TemporalCluster } from '../../devstack/temporal-cluster';
import { temporalConnectionSettings } from '../../lib/temporal-connection';
import { apiClient, isolatedApi, startStack, uniqueKey, type TestStack } from '../helpers/stack';
import { startTestCluster } from '../helpers/cluster';

/**
 * mTLS: the cluster's frontend serves TLS and requires a client certificate signed by the
 * test's CA (certificates made here with openssl). The API and the worker connect with the
 * TEMPORAL_TLS_* settings every process reads (lib/temporal-connection.ts) and a payment
 * goes through; without a certificate, or in plaintext, they are refused.
 */

let dir: string;
let cluster: TemporalCluster;
let stack: TestStack;
const file = (name: string) => path.join(dir, name);

function openssl(...args: string[]): void {
  execFileSync('openssl', args, { stdio: 'pipe' });
}

/** A CA, a server certificate for localhost / 127.0.0.1, and client certificates, all signed by the CA. */
function makeCertificates(): void {
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=payments test CA', '-keyout', file('ca.key'), '-out', file('ca.pem'),
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
  const issue = (name: string, subject: string, extensions: string) => {
    writeFileSync(file(`${name}.ext`), extensions);
    openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', subject, '-keyout', file(`${name}.key`), '-out', file(`${name}.csr`));
    openssl('x509', '-req', '-in', file(`${name}.csr`), '-CA', file('ca.pem'), '-CAkey', file('ca.key'), '-CAcreateserial', '-days', '2', '-out', file(`${name}.pem`), '-extfile', file(`${name}.ext`));
  };
  issue('server', '/CN=localhost', 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n');
  issue('client', '/CN=payments-app', 'extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n');
  issue('system-worker', '/CN=temporal-system-worker', 'extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n');
}

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'payorch-mtls-'));
  makeCertificates();
  cluster = await startTestCluster('mtls', {
    nodes: 1,
    shards: 2,
    tls: {
      certFile: file('server.pem'),
      keyFile: file('server.key'),
      clientCaFile: file('ca.pem'),
      systemWorkerCertFile: file('system-worker.pem'),
      systemWorkerKeyFile: file('system-worker.key'),
      serverCaFile: file('ca.pem'),
      serverName: 'localhost',
    },
  });
  // What the API and worker processes read from their environment.
  const { address, ...temporalConnection } = temporalConnectionSettings({
    TEMPORAL_ADDRESS: cluster.address,
    TEMPORAL_TLS_CERT: file('client.pem'),
    TEMPORAL_TLS_KEY: file('client.key'),
    TEMPORAL_TLS_CA: file('ca.pem'),
    TEMPORAL_TLS_SERVER_NAME: 'localhost',
  });
  stack = await startStack({ temporalAddress: address, temporalConnection, api: { TEMPORAL_RPC_TIMEOUT_MS: 3000 } });
  // Longer than the usual hook timeout: the cluster may wait for test/cluster/cluster.test.ts's
  // to stop first (test/helpers/cluster.ts: clusters on the shared PostgreSQL take turns).
}, 420_000);
afterAll(async () => {
  await stack?.stop();
  await cluster?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('Temporal with mTLS', () => {
  it('the API and the worker, with the client certificate, take a payment through', async () => {
    const tenant = await stack.createTenant('mtls');
    const api = apiClient(stack.apiUrl, tenant.apiKey);
    const response = await api.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 1200, currency: 'EUR', payment_method: 'pm_card_visa' }, uniqueKey());
    expect(response.status).toBe(201);
    expect(response.json.status).toBe('succeeded');
  });

  it('refuses a client without a certificate, and a plaintext one', async () => {
    const serverOnly = { serverRootCACertificate: readFileSync(file('ca.pem')), serverNameOverride: 'localhost' };
    await expect(Connection.connect({ address: cluster.address, tls: serverOnly, connectTimeout: 3000 })).rejects.toThrow();
    await expect(Connection.connect({ address: cluster.address, connectTimeout: 3000 })).rejects.toThrow();
    // The worker's (native) connection too.
    await expect(NativeConnection.connect({ address: cluster.address, tls: serverOnly })).rejects.toThrow();
    // An API whose client has no certificate fails closed: 503, nothing started.
    const tenant = await stack.createTenant('mtls-refused');
    const noCertificate = new Client({ connection: Connection.lazy({ address: cluster.address, tls: serverOnly }), namespace: 'default' });
    const refusedApi = await isolatedApi(stack, noCertificate);
    const refused = await apiClient(refusedApi.url, tenant.apiKey).post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 1200, currency: 'EUR', payment_method: 'pm_card_visa' }, uniqueKey());
    expect(refused.status).toBe(503);
    expect(refused.json.error.type).toBe('temporal_unavailable');
    // Nothing charged: a refused new payment's intent is kept (processing, no charge) for the retry.
    const [left] = await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM payments WHERE tenant_id = ${tenant.id} AND (status <> 'processing' OR provider_charge_id IS NOT NULL)`;
    expect(left!.n).toBe(0);
    await refusedApi.close();
  });

  it('refuses a certificate signed by another CA', async () => {
    const other = mkdtempSync(path.join(tmpdir(), 'payorch-mtls-other-'));
    try {
      openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=intruder', '-keyout', path.join(other, 'k.pem'), '-out', path.join(other, 'c.pem'));
      const tls = {
        serverRootCACertificate: readFileSync(file('ca.pem')),
        serverNameOverride: 'localhost',
        clientCertPair: { crt: readFileSync(path.join(other, 'c.pem')), key: readFileSync(path.join(other, 'k.pem')) },
      };
      await expect(Connection.connect({ address: cluster.address, tls, connectTimeout: 3000 })).rejects.toThrow();
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });
});
