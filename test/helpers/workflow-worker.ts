/**
 * The real payment and refund workflows on a real worker and the run's Temporal dev server,
 * with every activity replaced by a fake. Each run gets its own script of fakes (looked up
 * by its workflow id), so one worker per test file serves many runs side by side.
 *
 * Time cannot be skipped offline, so windows (the authorization's) are short inputs.
 */
import { randomBytes } from 'node:crypto';
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { WorkflowHandle } from '@temporalio/client';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { installTestRuntime } from './runtime';
import { inject } from 'vitest';
import type { ProviderSteps, RecordSteps } from '../../activities';
import type { ChargeAttemptInput, ChargeAttemptResult } from '../../activities/provider-steps';
import type { ProviderCharge, ProviderRefund } from '../../provider/types';
import type { RoutePlan } from '../../domain/payments-attempts';
import { FailureType, type FinalResponse, type ScopedKey } from '../../shared/definitions';
import type { RouteRequest } from '../../shared/routing';
import type { RefundWorkflowInput } from '../../shared/refunds';
import type { LateChargeInput, PaymentWorkflowInput } from '../../shared/payments';
import type { lateChargeWorkflow, paymentWorkflow, refundWorkflow } from '../../workflows';

/** A charge attempt as the fakes see it: at a named PSP (an input with `route` is planned first: chargeAttemptOf). */
export type ResolvedAttempt = Extract<ChargeAttemptInput, { canFailOver: boolean }>;
export type Steps = RecordSteps & Omit<ProviderSteps, 'chargeAttempt'> & { chargeAttempt(input: ResolvedAttempt): Promise<ChargeAttemptResult> };
export type StepName = keyof Steps;
type Step<N extends StepName> = Steps[N];
/**
 * What a test scripts for a run: any step, and two shorthands for the first charge attempt's
 * parts: `plan` (the route the worker's createFirstAttemptPlanner would decide) and
 * `chargeAnswer` (what the PSP answers to each attempt's charge).
 */
export type Fakes = Partial<Steps> & {
  plan?: (request: RouteRequest) => Promise<RoutePlan>;
  chargeAnswer?: (input: ResolvedAttempt) => Promise<ProviderCharge>;
};
/** The default route: the one configured PSP. */
const defaultPlan = async (): Promise<RoutePlan> => ({ providers: ['sandbox'], reason: 'default provider (no routing configured)', retryableDeclineCodes: ['processing_error', 'issuer_unavailable', 'try_again_later'] });

/** One activity execution as the workflow asked for it. */
export interface StepCall {
  step: StepName;
  input: unknown;
  attempt: number;
  /** Whether it ran as a local activity (inside a workflow task). */
  local: boolean;
}

interface Run {
  fakes: Fakes;
  calls: StepCall[];
}

const runs = new Map<string, Run>();

/** Answers of a happy provider and database, for whatever a test does not script. */
const happy: Steps = {
  async recordOrderTaken({ payment, holderPaymentId }) {
    return response(409, { error: { type: 'order_already_paid', payment_id: holderPaymentId, order_id: payment.orderId } });
  },
  async recordChargeOutcome({ payment, charge }) {
    return response(201, { id: payment.paymentId, status: charge.status });
  },
  async recordSettlement({ charge }) {
    return charge.status === 'canceled' ? 'canceled' : (charge.status as 'succeeded' | 'requires_capture' | 'declined');
  },
  async recordExpiry() {
    return 'expired';
  },
  async recordCapture({ paymentId, charge }) {
    return response(200, { id: paymentId, status: 'succeeded', amount_captured_minor: charge.amountCapturedMinor });
  },
  async recordCancel({ paymentId }) {
    return response(200, { id: paymentId, status: 'canceled' });
  },
  async recordPaymentFailure({ paymentId, failure }) {
    return response(201, { id: paymentId, status: 'failed', failure });
  },
  async recordOffSessionRefusal({ paymentId, refusal }) {
    return response(402, { id: paymentId, status: refusal.status, failure: { code: refusal.code, message: refusal.message } });
  },
  async beginRefund({ paymentId }) {
    return { kind: 'reserved', chargeId: chargeIdOf(paymentId), currency: 'EUR' };
  },
  async recordRefundOutcome({ request, refund }) {
    return response(201, { id: request.refundId, status: refund.status, failure_code: refund.failureCode });
  },
  async recordRefundUnconfirmed({ request }) {
    return response(202, { id: request.refundId, status: 'pending' });
  },
  async lateChargeStanding() {
    return { decision: 'act', status: 'expired', reason: 'the payment is expired' };
  },
  async storedCancellation() {
    return null;
  },
  async storedRefundSettlement() {
    return null;
  },
  async recordLateCharge() {},
  async recordAttempt() {},
  async recordRecovering({ payment }) {
    return response(202, { id: payment.paymentId, status: 'recovering' });
  },
  async recordRecoveryAttempt() {},
  async recordRecoveryEnd({ charge }) {
    return charge.declineCode === 'authentication_required' ? 'failed' : charge.status === 'succeeded' ? 'succeeded' : 'declined';
  },
  async reserveCardAttempt() {
    return { reserved: true, atMs: 0 };
  },
  async chargeAttempt(input) {
    return {
      kind: 'charge',
      charge: charge(input.paymentId, {
        id: input.attempt > 1 ? `${chargeIdOf(input.paymentId)}_${input.attempt}` : chargeIdOf(input.paymentId),
        status: input.capture ? 'succeeded' : 'requires_capture',
        amountMinor: input.amountMinor,
        amountCapturedMinor: input.capture ? input.amountMinor : 0,
      }),
    };
  },
  async captureCharge({ paymentId, amountMinor }) {
    return charge(paymentId, { status: 'succeeded', amountCapturedMinor: amountMinor });
  },
  async voidCharge({ paymentId }) {
    return charge(paymentId, { status: 'canceled' });
  },
  async retrieveCharge({ paymentId }) {
    // A happy PSP whose customer never finishes: the charge keeps waiting.
    return charge(paymentId, { status: 'requires_action' });
  },
  async completeChallenge({ paymentId }) {
    // A happy PSP whose customer approved: the details call answers the charge authorized and captured.
    return charge(paymentId, { status: 'succeeded' });
  },
  async refundCharge({ subKey, chargeId, amountMinor }) {
    return { id: `re_${subKey}`, chargeId, status: 'succeeded', amountMinor, failureCode: null, failureMessage: null };
  },
};

/** Every step dispatches to the fake scripted for the run that called it. */
function dispatchingActivities(): Steps {
  const names = Object.keys(happy) as StepName[];
  return Object.fromEntries(
    names.map((name) => [
      name,
      async (input: unknown) => {
        const { info } = Context.current();
        const workflowId = info.workflowExecution?.workflowId ?? '';
        const run = runs.get(workflowId);
        if (!run) throw ApplicationFailure.nonRetryable(`no fakes scripted for workflow ${workflowId}`);
        const call: StepCall = { step: name, input, attempt: info.attempt, local: info.isLocal };
        run.calls.push(call);
        if (name === 'chargeAttempt') return chargeAttemptOf(run, input as ChargeAttemptInput, call);
        const fake = ((run.fakes as Partial<Steps>)[name] ?? happy[name]) as (input: unknown) => Promise<unknown>;
        return fake(input);
      },
    ]),
  ) as unknown as Steps;
}

/**
 * chargeAttempt as the worker runs it. An input with `route` (attempt 1) is planned first, by
 * the run's `plan` fake as the worker's createFirstAttemptPlanner would, and is recorded (and
 * given to the fake) as the attempt at the plan's first PSP; the plan travels with the answer,
 * and a refusal is answered, not thrown, where the step may answer "not charged" (canFailOver)
 * or decided the route. A test that scripts only what
 * the PSP answers to the charge (`chargeAnswer`) scripts each attempt's answer.
 */
async function chargeAttemptOf(run: Run, input: ChargeAttemptInput, call: StepCall): Promise<ChargeAttemptResult> {
  const plan = input.route ? await (run.fakes.plan ?? defaultPlan)(input.route) : undefined;
  let attempt: ResolvedAttempt;
  if (input.route) {
    const { route: _route, ...charge } = input;
    attempt = { ...charge, provider: plan!.providers[0]!, canFailOver: input.canFailOver ?? plan!.providers.length > 1 };
  } else attempt = input;
  call.input = attempt;
  const chargeAnswer = run.fakes.chargeAnswer;
  const answer = run.fakes.chargeAttempt ?? (chargeAnswer ? async (i: ResolvedAttempt) => ({ kind: 'charge' as const, charge: await chargeAnswer(i) }) : happy.chargeAttempt);
  try {
    const result = await answer(attempt);
    return plan ? { ...result, plan } : result;
  } catch (error) {
    if ((plan || attempt.canFailOver) && error instanceof ApplicationFailure && error.type === FailureType.ProviderRejected) {
      return { kind: 'not_charged', outcome: 'rejected', errorCode: String(error.details?.[0] ?? 'provider_rejected'), message: error.message, plan };
    }
    throw error;
  }
}

export function response(status: number, body: Record<string, unknown>): FinalResponse {
  return { status, body: JSON.stringify(body), location: typeof body.id === 'string' ? `/v1/payments/${body.id}` : null };
}

export const chargeIdOf = (paymentId: string) => `ch_${paymentId}`;

export function charge(paymentId: string, fields: Partial<ProviderCharge>): ProviderCharge {
  return {
    id: chargeIdOf(paymentId),
    status: 'succeeded',
    amountMinor: 4200,
    amountCapturedMinor: 0,
    amountRefundedMinor: 0,
    currency: 'EUR',
    declineCode: null,
    declineMessage: null,
    nextAction: null,
    reference: paymentId,
    ...fields,
  };
}

export function failedRefund(chargeId: string, amountMinor: number, reason: string): ProviderRefund {
  return { id: 're_failed', chargeId, status: 'failed', amountMinor, failureCode: 'refund_failed', failureMessage: reason };
}

/** What a step throws when the provider refuses a request outright. */
export const providerRefuses = (message: string) =>
  ApplicationFailure.create({ type: FailureType.ProviderRejected, message, nonRetryable: true });
/** What a database step throws when the ledger refuses a posting for good. */
export const ledgerRefuses = (message: string) =>
  ApplicationFailure.create({ type: FailureType.LedgerRejected, message, nonRetryable: true });

/** A promise with its resolver, to hold a fake step until the test lets it go. */
export function gate<T = void>() {
  let open!: (value: T) => void;
  const opened = new Promise<T>((resolve) => (open = resolve));
  return { open, opened };
}

export function scopedKey(operation: string): ScopedKey {
  return { tenantId: 'ten_unit', operation, key: randomBytes(6).toString('hex'), fingerprint: 'fp', retentionSeconds: 86_400 };
}

export function paymentInput(overrides: Partial<PaymentWorkflowInput> = {}): PaymentWorkflowInput {
  return {
    paymentId: `pay_${randomBytes(6).toString('hex')}`,
    tenantId: 'ten_unit',
    orderId: `ord_${randomBytes(4).toString('hex')}`,
    amountMinor: 4200,
    currency: 'EUR',
    paymentMethod: 'pm_card_visa',
    captureMethod: 'automatic',
    description: null,
    metadata: {},
    idempotency: scopedKey('POST /v1/payments'),
    requestId: 'req_unit',
    // Long enough that no test sees it end unless it asks for a short one.
    authorizationWindowMs: 10 * 60_000,
    ...overrides,
  };
}

export function refundInput(overrides: Partial<RefundWorkflowInput> = {}): RefundWorkflowInput {
  return {
    refundId: `re_${randomBytes(6).toString('hex')}`,
    tenantId: 'ten_unit',
    paymentId: `pay_${randomBytes(6).toString('hex')}`,
    amountMinor: 1000,
    reason: null,
    idempotency: scopedKey('POST /v1/payments/{id}/refunds'),
    requestId: 'req_unit',
    ...overrides,
  };
}

export interface WorkflowBench {
  env: TestWorkflowEnvironment;
  worker: Worker;
  /** Its task queue: a second bench given it (`taskQueue`) takes over the runs when this one stops. */
  taskQueue: string;
  startPayment(input: PaymentWorkflowInput, fakes?: Fakes): Promise<ScriptedRun<typeof paymentWorkflow>>;
  startRefund(input: RefundWorkflowInput, fakes?: Fakes): Promise<ScriptedRun<typeof refundWorkflow>>;
  startLateCharge(input: LateChargeInput, fakes?: Fakes): Promise<ScriptedRun<typeof lateChargeWorkflow>>;
  stop(): Promise<void>;
}

type ScriptedWorkflow = typeof paymentWorkflow | typeof refundWorkflow | typeof lateChargeWorkflow;

export interface ScriptedRun<W extends ScriptedWorkflow> {
  handle: WorkflowHandle<W>;
  /** The steps called so far, in order, retries included. */
  calls: StepCall[];
  /** Names of the steps called so far (each attempt once). */
  steps(): StepName[];
  /** The inputs the step was called with, one per attempt. */
  inputsOf<N extends StepName>(step: N): Parameters<Step<N>>[0][];
}

/**
 * A worker with the run's workflow bundle (test/global-setup.ts; or `bundleCode`, e.g. the code
 * before a patch) and dispatching fakes, on a task queue of its own (or `taskQueue`), attached
 * to the run's dev server. Stop it in afterAll.
 */
export async function startWorkflowBench(options: { bundleCode?: string; taskQueue?: string } = {}): Promise<WorkflowBench> {
  await installTestRuntime();
  const env = await TestWorkflowEnvironment.createFromExistingServer({ address: inject('temporalAddress'), namespace: 'default' });
  const taskQueue = options.taskQueue ?? `workflow-unit-${randomBytes(4).toString('hex')}`;
  const worker = await Worker.create({
    connection: env.nativeConnection,
    namespace: 'default',
    taskQueue,
    workflowBundle: options.bundleCode !== undefined ? { code: options.bundleCode } : { codePath: inject('workflowBundlePath') },
    activities: dispatchingActivities(),
  });
  const running = worker.run();

  async function start<W extends ScriptedWorkflow>(
    workflowType: 'paymentWorkflow' | 'refundWorkflow' | 'lateChargeWorkflow',
    workflowId: string,
    input: PaymentWorkflowInput | RefundWorkflowInput | LateChargeInput,
    fakes: Fakes,
  ): Promise<ScriptedRun<W>> {
    const run: Run = { fakes, calls: [] };
    runs.set(workflowId, run);
    const handle = (await env.client.workflow.start(workflowType, {
      taskQueue,
      workflowId,
      args: [input],
      memo: 'requestId' in input ? { request_id: input.requestId } : {},
    })) as WorkflowHandle<W>;
    return {
      handle,
      calls: run.calls,
      steps: () => run.calls.map((call) => call.step),
      inputsOf: <N extends StepName>(step: N) => run.calls.filter((call) => call.step === step).map((call) => call.input as Parameters<Step<N>>[0]),
    };
  }

  return {
    env,
    worker,
    taskQueue,
    startPayment: (input, fakes = {}) => start('paymentWorkflow', `payment-${input.paymentId}`, input, fakes),
    startRefund: (input, fakes = {}) => start('refundWorkflow', `refund-${input.refundId}`, input, fakes),
    startLateCharge: (input, fakes = {}) => start('lateChargeWorkflow', `late-charge-${input.chargeId}`, input, fakes),
    async stop() {
      worker.shutdown();
      await running;
      await env.teardown();
    },
  };
}

/** The parsed body of a final response. */
export function bodyOf(final: FinalResponse | null | undefined): Record<string, unknown> {
  if (!final) throw new Error('no final response');
  return JSON.parse(final.body) as Record<string, unknown>;
}
