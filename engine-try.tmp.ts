import { startTemporalCluster } from './lib/temporal-cluster';
import { startStack, apiClient } from './lib/stack';
import { createLogger } from './lib/logger';
import { startFrontendBalancer } from './test/cluster/frontend-balancer';
const c = await startTemporalCluster({ postgresUrl: 'postgres://postgres@127.0.0.1:5432/postgres', databaseName: 'engine_try_t', visibilityDatabaseName: 'engine_try_v', dataDir: '/tmp/engine-try' });
const b = await startFrontendBalancer(c.nodes.map((n) => n.address));
const stack = await startStack({ databaseUrl: process.env.DBURL!, temporalAddress: b.address, logger: createLogger({ name: 't', level: 'warn' }) });
try {
  const t = await stack.createTenant('x');
  const api = apiClient(stack.apiUrl, t.apiKey);
  const r = await api.post('/v1/payments', { order_id: 'o' + Date.now(), amount_minor: 1000, currency: 'EUR', payment_method: 'pm_card_visa' }, 'k' + Date.now());
  console.log(r.status, r.text.slice(0, 500));
  for (let i = 0; i < 4; i++) { const r2 = await api.post('/v1/payments', { order_id: 'o' + i + Date.now(), amount_minor: 1000, currency: 'EUR', payment_method: 'pm_card_visa', capture_method: 'manual' }, 'k' + i + Date.now()); console.log(r2.status, r2.text.slice(0, 300)); }
} finally {
  await stack.stop(); await c.stop();
}
