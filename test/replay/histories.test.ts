import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { bundleWorkflowCode, Worker, type ReplayWorkerOptions } from '@temporalio/worker';
import { installTestRuntime } from '../helpers/runtime';
import { DeterminismViolationError } from '@temporalio/workflow';
import {
  describeHistory,
  encryptionKeyIds,
  failureConverterPath,
  historyFilesOnDisk,
  loadHistory,
  readHistoryIndex,
  workflowInterceptorModules,
  type HistoryEntry,
} from '../../devstack/histories';
import { alteredWorkflows, type Alteration } from '../../testkit/altered-workflows';
import { TEST_PAYLOAD_KEYS, testDataConverter, testPayloadKeys } from '../../testkit/payload-keys';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import type { ChargeAttemptResult } from '../../activities/provider-steps';
import type { RouteDecisionRecord } from '../../shared/routing';
import { leaks } from '../helpers/history-payloads';
import { paymentDataConverter } from '../../lib/data-converter';
import { startTracing, stopTracing, tracingWorkflowSinks } from '../../lib/tracing';
import { AesGcmPayloadCodec, generatePayloadKey, parsePayloadKeys } from '../../lib/payload-codec';

/**
 * docs/CONTRACT.md §5.8 and §9.3: workflow code changes are proven safe by replaying the histories
 * recorded from real runs (test/histories, `npm run histories:record`) against the current
 * code. A replay that produces other commands than the history recorded is a
 * nondeterminism: the change would break every run in flight.
 */

const silent = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} };

let index: HistoryEntry[];
let currentCode: ReplayWorkerOptions['workflowBundle'];

beforeAll(async () => {
  await installTestRuntime();
  index = readHistoryIndex().histories;
  // The run's bundle of workflows/ (test/global-setup.ts), built as the worker builds it.
  currentCode = { code: readFileSync(inject('workflowBundlePath'), 'utf8') };
});

/** Replays the listed histories in one replay worker; the failures, by file. */
async function replay(workflowBundle: ReplayWorkerOptions['workflowBundle'], entries: HistoryEntry[], dataConverter = testDataConverter, sinks?: ReplayWorkerOptions['sinks']) {
  const histories = entries.map((entry) => ({ workflowId: entry.file, history: loadHistory(entry.file) }));
  const failures: { file: string; error: Error }[] = [];
  let replayed = 0;
  for await (const result of Worker.runReplayHistories({ workflowBundle, replayName: 'histories-test', dataConverter, ...(sinks ? { sinks } : {}) }, histories)) {
    replayed++;
    if (result.error) failures.push({ file: result.workflowId, error: result.error });
  }
  return { replayed, failures };
}

const bundles = new Map<string, Promise<ReplayWorkerOptions['workflowBundle']>>();
/** An altered payment workflow (testkit/altered-workflows.ts), bundled like the real ones. */
function fixtureBundle(name: Alteration): Promise<ReplayWorkerOptions['workflowBundle']> {
  if (!bundles.has(name)) {
    const workflowsPath = alteredWorkflows(name);
    bundles.set(name, bundleWorkflowCode({ workflowsPath, workflowInterceptorModules, failureConverterPath, logger: silent }).then(({ code }) => ({ code })));
  }
  return bundles.get(name)!;
}

const entry = (file: string) => {
  const found = index.find((e) => e.file === file);
  if (!found) throw new Error(`test/histories/index.json does not list ${file}`);
  return found;
};

describe('the recorded histories', () => {
  it('are all listed in the index, and each entry matches its file (no stale or hand-edited entry)', () => {
    expect(index.map((e) => e.file).sort()).toEqual(historyFilesOnDisk());
    for (const e of index) {
      const facts = describeHistory(loadHistory(e.file));
      expect({ file: e.file, ...facts }).toEqual({
        file: e.file,
        workflowType: e.workflowType,
        events: e.events,
        activities: e.activities,
        localActivities: e.localActivities,
        updates: e.updates,
        maxActivityAttempt: e.maxActivityAttempt,
        patches: e.patches,
      });
    }
  });

  it('cover every scenario of the payment, refund, reconciliation and dispute workflows', () => {
    const scenarios = new Set(index.map((e) => e.scenario));
    for (const scenario of [
      'success',
      'decline',
      'lost-response',
      'flaky-provider',
      'manual-capture',
      'cancel',
      'authorization-expired',
      'refund-partial-first',
      'refund-partial-second',
      'refund-exceeds-captured',
      'compensation',
      'capture-compensation',
      // Payments that wait: the customer's challenge and the bank's settlement.
      'three-ds-approved',
      'three-ds-denied',
      'three-ds-manual-capture',
      'three-ds-expired',
      'three-ds-webhook-lost',
      'three-ds-decided-at-deadline',
      'sepa-succeeded',
      'sepa-failed',
      'reconciliation',
      'failover-unavailable',
      'failover-declined-manual-capture',
      'routing-success-rate',
      'intent-in-claim',
      // A dispute won on submitted evidence, and one conceded.
      'dispute-won',
      'dispute-lost',
    ]) {
      expect(scenarios, scenario).toContain(scenario);
    }
    expect(new Set(index.map((e) => e.workflowType))).toEqual(new Set(['paymentWorkflow', 'refundWorkflow', 'reconciliationWorkflow', 'disputeWorkflow']));
    // One history per scenario, each recorded on the code path the current code takes.
    expect(index.map((e) => e.scenario).sort()).toEqual([...new Set(index.map((e) => e.scenario))].sort());
    // A pinned type's code carries no patches (below), so neither do its histories.
    const pinned = new Set(versioningBehaviours().filter((b) => b.behaviour === 'PINNED').map((b) => b.type));
    expect(pinned).toContain('paymentWorkflow');
    for (const e of index.filter((e) => pinned.has(e.workflowType))) expect(e.patches, e.file).toEqual([]);
    // A payment the PSP answers at once is one workflow task: both steps local, no regular activity.
    const success = loadHistory('success.json').events ?? [];
    expect(success.filter((e) => e.workflowTaskCompletedEventAttributes).length).toBe(1);
    expect(entry('success.json').activities).toEqual([]);
    expect(entry('success.json').localActivities).toBe(2);
    // The retry scenario really retried; the lost response was resolved by the regular charge
    // activity after the local try (its lookup found the charge), with no second charge.
    expect(entry('lost-response.json').activities).toEqual(['chargeAttempt']);
    expect(entry('flaky-provider.json').maxActivityAttempt).toBeGreaterThanOrEqual(2);
    // The lost webhook was made up for by the poll; the expiry voided; the window's end asked the PSP.
    expect(entry('three-ds-webhook-lost.json').activities).toContain('retrieveCharge');
    expect(entry('three-ds-expired.json').activities).toContain('voidCharge');
    expect(entry('three-ds-manual-capture.json').activities).toContain('captureCharge');
    expect(entry('three-ds-decided-at-deadline.json').activities).toEqual(['retrieveCharge']);
    // Every payment run starts at the charge: the intent is the API's (the charge and its record, two local activities).
    expect(entry('intent-in-claim.json').localActivities).toBe(2);
  });
});

/** A workflows/ module, parsed. */
const workflowModule = (file: string) => ts.createSourceFile(file, readFileSync(path.join('workflows', file), 'utf8'), ts.ScriptTarget.Latest, true);

/** Each workflow type's Worker Versioning behaviour and its module, as workflows/versioning.ts sets them. */
function versioningBehaviours(): { type: string; behaviour: string; module: string }[] {
  const source = workflowModule('versioning.ts');
  const moduleOf = new Map<string, string>();
  const found: { type: string; behaviour: string; module: string }[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier) && node.moduleSpecifier.text.startsWith('./')) {
      const bindings = node.importClause?.namedBindings;
      if (bindings && ts.isNamedImports(bindings)) for (const name of bindings.elements) moduleOf.set(name.name.text, `${node.moduleSpecifier.text.slice(2)}.ts`);
    }
    if (ts.isCallExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'setWorkflowOptions') {
      const [options, workflow] = node.arguments;
      const behaviour = options && ts.isCallExpression(options) ? options.arguments[0] : undefined;
      if (behaviour && ts.isStringLiteral(behaviour) && workflow && ts.isIdentifier(workflow)) {
        found.push({ type: workflow.text, behaviour: behaviour.text, module: moduleOf.get(workflow.text) ?? 'unknown' });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The patched() and deprecatePatch() calls in a workflows/ module, by line. */
function patchCalls(file: string): string[] {
  const source = workflowModule(file);
  const calls: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isCallExpression(node)) {
      const callee = ts.isPropertyAccessExpression(node.expression) ? node.expression.name : node.expression;
      if (ts.isIdentifier(callee) && (callee.text === 'patched' || callee.text === 'deprecatePatch')) {
        calls.push(`workflows/${file}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}: ${node.getText()}`);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return calls;
}

describe('the versioning rule (docs/versioning.md): a pinned workflow type carries no patches', () => {
  it('has no patched() or deprecatePatch() call outside the modules of the auto-upgrading workflow types', () => {
    const behaviours = versioningBehaviours();
    // Every type the worker registers (workflows/index.ts) is listed, each in a module of workflows/.
    const registered = workflowModule('index.ts').statements.flatMap((statement) =>
      ts.isExportDeclaration(statement) && statement.exportClause && ts.isNamedExports(statement.exportClause) ? statement.exportClause.elements.map((e) => e.name.text) : [],
    );
    expect(registered).toContain('paymentWorkflow');
    expect(behaviours.map((b) => b.type).sort()).toEqual(registered.sort());
    for (const b of behaviours) expect(readdirSync('workflows'), b.type).toContain(b.module);
    expect(behaviours.find((b) => b.type === 'paymentWorkflow')).toMatchObject({ behaviour: 'PINNED', module: 'payments.ts' });
    // A module shared by the pinned types (saga.ts, activities.ts, …) is covered as well.
    const autoUpgrading = new Set(behaviours.filter((b) => b.behaviour === 'AUTO_UPGRADE').map((b) => b.module));
    // The modules in folders of workflows/ too (workflows/payments/: the payment run's phases).
    const pinnedCode = readdirSync('workflows', { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts') && !autoUpgrading.has(f));
    expect(pinnedCode).toContain('payments.ts');
    expect(pinnedCode).toContain(path.join('payments', 'run.ts'));
    expect(pinnedCode.flatMap(patchCalls)).toEqual([]);
  });
});

describe('every recorded history replays against the current workflow code', () => {
  it('replays all of them without a nondeterminism or any other replay failure', async () => {
    const { replayed, failures } = await replay(currentCode, index);
    expect(failures.map((f) => `${f.file}: ${f.error.name}: ${f.error.message}`)).toEqual([]);
    expect(replayed).toBe(index.length);
    expect(replayed).toBeGreaterThanOrEqual(27);
  });

  it('replays all of them with tracing on (histories recorded with it off): the workflow side traces without a command of its own', async () => {
    // Nothing listens there: replay exports nothing (the isolate's sink is not called on replay).
    expect(startTracing('histories-test', { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://127.0.0.1:9/v1/traces' })).toBe(true);
    try {
      const { replayed, failures } = await replay(currentCode, index, testDataConverter, tracingWorkflowSinks());
      expect(failures.map((f) => `${f.file}: ${f.error.name}: ${f.error.message}`)).toEqual([]);
      expect(replayed).toBe(index.length);
    } finally {
      await stopTracing();
    }
  });
});

/** The recorded result of the history's first local activity of `type` (its marker), decoded with the test key. */
async function firstLocalResult<T>(file: string, type: string): Promise<T> {
  const markers = (loadHistory(file).events ?? []).flatMap((event) => {
    const details = event.markerRecordedEventAttributes?.details;
    if (event.markerRecordedEventAttributes?.markerName !== 'core_local_activity' || !details) return [];
    const data = JSON.parse(Buffer.from(details.data!.payloads![0]!.data!).toString('utf8')) as { activity_type: string };
    return data.activity_type === type ? [details.result!.payloads![0]! as Payload] : [];
  });
  const [decoded] = await new AesGcmPayloadCodec(testPayloadKeys).decode([markers[0]!]);
  return defaultPayloadConverter.fromPayload<T>(decoded!);
}

describe('a success-rate decision is recorded in the payment\'s history, read back, never decided again', () => {
  it('routing-success-rate.json: the first charge step\'s recorded result carries the decision (success_rate, probabilities adding up to 1, chosen among the candidates, tried first), and the history replays', async () => {
    const file = 'routing-success-rate.json';
    expect(entry(file).workflowType).toBe('paymentWorkflow');
    const result = await firstLocalResult<ChargeAttemptResult>(file, 'chargeAttempt');
    const decision = result.plan!.decision as RouteDecisionRecord;
    expect(decision.strategy).toBe('success_rate');
    expect(decision.candidates.map((c) => c.provider).sort()).toEqual(['sandbox', 'sandbox-b']);
    expect(decision.candidates.reduce((sum, c) => sum + c.selection_probability, 0)).toBeCloseTo(1, 9);
    for (const candidate of decision.candidates) expect(candidate.selection_probability, candidate.provider).toBeGreaterThan(0);
    expect(decision.candidates.map((c) => c.provider)).toContain(decision.chosen);
    // The route the run charged along is the decision's: the chosen PSP first.
    expect(result.plan!.providers[0]).toBe(decision.chosen);
    expect(result).toMatchObject({ kind: 'charge', charge: { status: 'succeeded' } });
    const { replayed, failures } = await replay(currentCode, [entry(file)]);
    expect({ replayed, failures }).toEqual({ replayed: 1, failures: [] });
  });
});

describe('the replay check has teeth', () => {
  it('fails the success histories with DeterminismViolationError when an activity is added to the payment workflow', async () => {
    const altered = await fixtureBundle('activity-added');
    const replayOf = (file: string) =>
      Worker.runReplayHistory({ workflowBundle: altered, replayName: 'teeth', dataConverter: testDataConverter }, loadHistory(file), file).then(
        () => null,
        (error: unknown) => error,
      );
    // The history recorded the local chargeAttempt where the altered code schedules the screen.
    const failure = await replayOf('success.json');
    expect(failure).toBeInstanceOf(DeterminismViolationError);
    expect((failure as Error).message).toMatch(/LocalActivity/);
  });

  it('fails every payment history that kept the charge in its memo when that memo command is removed', async () => {
    const payments = index.filter((e) => e.workflowType === 'paymentWorkflow');
    const { replayed, failures } = await replay(await fixtureBundle('memo-removed'), payments);
    expect(replayed).toBe(payments.length);
    expect(failures.map((f) => f.file).sort()).toEqual(payments.map((e) => e.file).sort());
    for (const failure of failures) expect(failure.error, failure.file).toBeInstanceOf(DeterminismViolationError);
  });

  it('fails every payment history when attempt 1 runs as the regular activity instead of the local one', async () => {
    const payments = index.filter((e) => e.workflowType === 'paymentWorkflow');
    const { replayed, failures } = await replay(await fixtureBundle('first-charge-regular'), payments);
    expect(replayed).toBe(payments.length);
    expect(failures.map((f) => f.file).sort()).toEqual(payments.map((e) => e.file).sort());
    for (const failure of failures) expect(failure.error, failure.file).toBeInstanceOf(DeterminismViolationError);
  });

  it('still replays the refund histories with that altered bundle (only the payment workflow changed)', async () => {
    const refunds = index.filter((e) => e.workflowType === 'refundWorkflow');
    const { replayed, failures } = await replay(await fixtureBundle('activity-added'), refunds);
    expect(replayed).toBe(refunds.length);
    expect(failures).toEqual([]);
  });
});

describe('the recorded histories are encrypted, and stay readable across a key rotation', () => {
  const encrypted = () => index;

  it('hold ciphertext only, under the test key: no payload in clear but search attributes and SDK bookkeeping', () => {
    expect(encrypted().length).toBeGreaterThanOrEqual(27);
    for (const e of encrypted()) {
      const history = loadHistory(e.file);
      expect(encryptionKeyIds(history), e.file).toEqual([TEST_PAYLOAD_KEYS.split(':')[0]]);
      expect(leaks(history), e.file).toEqual([]);
      const raw = readFileSync(path.join('test', 'histories', e.file), 'utf8');
      // Nothing a merchant sent (card tokens look like pm_…) is readable in the file.
      expect(raw, e.file).not.toMatch(/pm_card_/);
    }
  });

  it('replay after a rotation to "new,old": histories written under the old key replay; with the new key alone they cannot', async () => {
    const newKey = generatePayloadKey('test-key-2');
    const rotated = paymentDataConverter(parsePayloadKeys(`${newKey},${TEST_PAYLOAD_KEYS}`));
    const afterRotation = await replay(currentCode, encrypted(), rotated);
    expect(afterRotation.failures.map((f) => `${f.file}: ${f.error.message}`)).toEqual([]);
    expect(afterRotation.replayed).toBe(encrypted().length);

    const oldKeyDropped = await replay(currentCode, [entry('success.json')], paymentDataConverter(parsePayloadKeys(newKey)));
    expect(oldKeyDropped.failures).toHaveLength(1);
    // The worker cannot read the input: a failed workflow task, not a verdict on the code.
    const error = oldKeyDropped.failures[0]!.error;
    expect(error).not.toBeInstanceOf(DeterminismViolationError);
    expect(error.message).toMatch(/workflow task failure/);
  });
});
