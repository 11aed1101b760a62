import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createDisputeProviderSteps } from '../../activities/disputes';
import { providerRegistry } from '../../provider/registry';
import { SandboxProvider } from '../../provider/sandbox/client';
import type { ProviderDispute } from '../../provider/types';
import { startSandbox, type RunningSandbox } from '../../sandbox/server';
import { FailureType } from '../../shared/definitions';
import { eventually } from '../helpers/eventually';

/**
 * A merchant's answer to a dispute whose PSP answer was lost, retried after the PSP forgot the
 * key (the sandbox forgets keys after SANDBOX_IDEMPOTENCY_KEY_TTL_SECONDS, as a real PSP does
 * after a day; a retry may come later than that). The repeat would be refused as "not open",
 * and the merchant told 409 for evidence that was in fact submitted. The dispute steps
 * (activities/disputes.ts) run as Temporal runs them, attempt by attempt, against the real
 * sandbox: a retry looks at the dispute first.
 */

let sandbox: RunningSandbox;
let provider: SandboxProvider;
let sql: postgres.Sql;
let steps: ReturnType<typeof createDisputeProviderSteps>;

beforeAll(async () => {
  sandbox = await startSandbox({ databaseUrl: inject('databaseUrl'), port: 0, idempotencyKeyTtlSeconds: 1, disputeAfterMs: 100, disputeDecisionMs: 60_000 });
  provider = new SandboxProvider({ baseUrl: sandbox.url, timeoutMs: 5_000 });
  sql = postgres(inject('databaseUrl'), { max: 1 });
  steps = createDisputeProviderSteps(providerRegistry({ sandbox: provider }), sql);
});
afterAll(async () => {
  await sql?.end();
  await sandbox?.close();
});

const unique = (prefix: string) => `${prefix}_${randomBytes(6).toString('hex')}`;
const attempt = <A extends unknown[], R>(n: number, step: (...args: A) => Promise<R>, ...args: A) => new MockActivityEnvironment({ attempt: n }).run(step, ...args) as Promise<R>;

/** A captured charge the network disputes (a chargeback that needs a response). */
async function openDispute(): Promise<ProviderDispute> {
  const charge = await provider.createCharge({ idempotencyKey: unique('key'), amountMinor: 4_000, currency: 'EUR', paymentMethod: 'pm_card_createDispute', capture: true, reference: unique('pay'), description: null });
  return eventually(async () => (await provider.disputes.listDisputes({ limit: 100 })).data.find((d) => d.chargeId === charge.id) ?? null, 15_000, 50, 'the dispute opened');
}

/** Repeats the call under its key until the PSP refuses it as not open: it forgot the key (a live key replays the first answer). */
const untilForgotten = (call: () => Promise<unknown>) =>
  eventually(async () => call().then(() => false, (error: { code?: string }) => error.code === 'dispute_not_open'), 10_000, 100, 'the PSP forgot the key');

describe('a dispute answer retried after the PSP forgot its key', () => {
  it('evidence submitted by the attempt whose answer was lost: the retry finds it submitted and answers with the dispute', async () => {
    const dispute = await openDispute();
    const input = { provider: 'sandbox', providerDisputeId: dispute.id, subKey: unique('ev'), submit: true, evidence: { uncategorized_text: 'winning_evidence: delivered', product_description: 'a lamp' } };
    const first = await attempt(1, steps.updateDispute, input);
    expect(first).toMatchObject({ id: dispute.id, status: 'under_review' });

    await untilForgotten(() => provider.disputes.updateDispute({ idempotencyKey: input.subKey, disputeId: dispute.id, evidence: input.evidence, submit: true }));
    const retried = await attempt(2, steps.updateDispute, input);
    expect(retried).toMatchObject({ id: dispute.id, status: 'under_review', evidenceSubmittedAt: first.evidenceSubmittedAt });
  });

  it('a retry whose evidence is not what was submitted is still refused', async () => {
    const dispute = await openDispute();
    await attempt(1, steps.updateDispute, { provider: 'sandbox', providerDisputeId: dispute.id, subKey: unique('ev'), submit: true, evidence: { uncategorized_text: 'winning_evidence: delivered' } });
    const other = { provider: 'sandbox', providerDisputeId: dispute.id, subKey: unique('ev'), submit: true, evidence: { uncategorized_text: 'winning_evidence: delivered', receipt: 'r-1' } };
    await expect(attempt(2, steps.updateDispute, other)).rejects.toMatchObject({ type: FailureType.ProviderRejected });
    // A first attempt never looks: the PSP's refusal is the answer.
    await expect(attempt(1, steps.updateDispute, { ...other, subKey: unique('ev'), evidence: { uncategorized_text: 'winning_evidence: delivered' } })).rejects.toMatchObject({ type: FailureType.ProviderRejected });
  });

  it('a concession whose answer was lost: the retry finds the dispute lost and answers with it', async () => {
    const dispute = await openDispute();
    const input = { provider: 'sandbox', providerDisputeId: dispute.id, subKey: unique('close') };
    expect(await attempt(1, steps.closeDispute, input)).toMatchObject({ status: 'lost' });
    await untilForgotten(() => provider.disputes.closeDispute({ idempotencyKey: input.subKey, disputeId: dispute.id }));
    expect(await attempt(2, steps.closeDispute, input)).toMatchObject({ id: dispute.id, stage: 'chargeback', status: 'lost' });
  });
});
