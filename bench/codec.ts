/**
 * npm run bench:codec — the payload codec's own cost, per payload, on this machine: AES-256-GCM
 * encryption and decryption (lib/payload-codec.ts) of payloads shaped like the ones a payment
 * writes, and the bytes each gains. A micro-benchmark of a few seconds on one core, to put
 * beside the full benchmark (npm run bench, BENCH_PAYLOAD_ENCRYPTION=off for the comparison).
 */
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import { AesGcmPayloadCodec, generatePayloadKey, parsePayloadKeys } from '../lib/payload-codec';

const codec = new AesGcmPayloadCodec(parsePayloadKeys(`${generatePayloadKey('new')},${generatePayloadKey('old')}`));
const id = (prefix: string) => `${prefix}_01m8p9vzdkd8ebvn1gmymsz4gr`;

/** What one payment run encodes: its input, a provider charge, the final response, a summary. */
const samples: Record<string, unknown> = {
  'activity summary': 'record outcome + ledger + outbox',
  'payment workflow input': {
    paymentId: id('pay'),
    tenantId: id('ten'),
    orderId: 'order-1001',
    amountMinor: 4999,
    currency: 'EUR',
    paymentMethod: 'pm_card_visa',
    captureMethod: 'automatic',
    description: 'Two tickets, row 12',
    metadata: { cart: 'c_123', customer: 'cus_8812' },
    idempotency: { tenantId: id('ten'), operation: 'POST /v1/payments', key: 'order-1001-attempt-1', fingerprint: 'f'.repeat(64), retentionSeconds: 259200 },
    requestId: id('req'),
    authorizationWindowMs: 604800000,
  },
  'final response': {
    status: 201,
    body: JSON.stringify({ id: id('pay'), object: 'payment', order_id: 'order-1001', amount_minor: 4999, currency: 'EUR', status: 'succeeded', payment_method: 'pm_card_visa', metadata: { cart: 'c_123' }, description: 'Two tickets, row 12', provider_charge_id: 'ch_5808d69086802e2f30afd8cf', workflow_id: `payment-${id('ten')}-k.order-1001-attempt-1`, created_at: new Date().toISOString(), updated_at: new Date().toISOString() }),
    location: `/v1/payments/${id('pay')}`,
  },
  '64 KiB payload': { blob: 'x'.repeat(64 * 1024) },
};

function measure(payload: Payload, iterations: number) {
  for (let i = 0; i < 2000; i++) codec.decrypt(codec.encrypt(payload)); // warm-up (JIT, OpenSSL)
  let sealed = codec.encrypt(payload);
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) sealed = codec.encrypt(payload);
  const t1 = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) codec.decrypt(sealed);
  const t2 = process.hrtime.bigint();
  const size = (p: Payload) => (p.data?.length ?? 0) + Object.entries(p.metadata ?? {}).reduce((n, [k, v]) => n + k.length + v.length, 0);
  return {
    encodeMicros: Number(t1 - t0) / 1000 / iterations,
    decodeMicros: Number(t2 - t1) / 1000 / iterations,
    bytes: size(payload),
    encryptedBytes: size(sealed),
  };
}

console.log(`payload codec cost per payload (Node ${process.version}, one core; each figure the median of 5 runs)`);
console.log('| payload | bytes in clear | bytes encrypted | encode µs | decode µs |');
console.log('|---|---:|---:|---:|---:|');
for (const [name, value] of Object.entries(samples)) {
  const payload = defaultPayloadConverter.toPayload(value);
  const iterations = (payload.data?.length ?? 0) > 10_000 ? 2_000 : 20_000;
  const runs = Array.from({ length: 5 }, () => measure(payload, iterations));
  const median = (pick: (r: (typeof runs)[number]) => number) => runs.map(pick).sort((a, b) => a - b)[2]!;
  console.log(`| ${name} | ${runs[0]!.bytes} | ${runs[0]!.encryptedBytes} | ${median((r) => r.encodeMicros).toFixed(1)} | ${median((r) => r.decodeMicros).toFixed(1)} |`);
}
