/**
 * Carries the id of the HTTP request a workflow serves into every workflow log line and, as a
 * header, into every activity it schedules: the request that started the workflow (the memo's
 * request_id, set by the API), until the workflow says it serves another one (a capture or
 * cancel command: `serveRequest`). The activity side (worker/interceptors.ts) reads only that
 * header, never the activity's input. Also gives every activity its summary
 * (workflows/activities.ts). Headers are not part of what replay compares, so the recorded
 * histories still replay (the replay tests hold histories recorded before the summaries existed).
 *
 * And traces the run (docs/tracing.md): OpenTelemetry's workflow interceptors continue the
 * trace whose context the client put into the start's, signal's or update's headers, open a span
 * per activity scheduled and hand its context to the activity in a header, and add trace_id and
 * span_id to workflow log lines. They are deterministic on replay (the SDK's flags gate every
 * change of their yields), and their spans leave the isolate through the `exporter` sink, which
 * is not called on replay; the worker registers it always, a no-op while tracing is off
 * (lib/tracing.ts tracingWorkflowSinks).
 */
import { defaultPayloadConverter } from '@temporalio/common';
import { headersWithContext, TRACE_HEADER } from '@temporalio/interceptors-opentelemetry/lib/instrumentation.js';
import { OpenTelemetryInboundInterceptor, OpenTelemetryInternalsInterceptor, OpenTelemetryOutboundInterceptor } from '@temporalio/interceptors-opentelemetry/lib/workflow/index.js';
import {
  workflowInfo,
  type ActivityInput,
  type LocalActivityInput,
  type Next,
  type QueryInput,
  type SignalInput,
  type UpdateInput,
  type WorkflowExecuteInput,
  type WorkflowInboundCallsInterceptor,
  type WorkflowInterceptorsFactory,
  type WorkflowOutboundCallsInterceptor,
} from '@temporalio/workflow';
import { REQUEST_ID_HEADER } from '../shared/definitions';
import { activitySummaries } from './activities';

/** The request a command made the workflow serve; per workflow (workflow module state is isolated per run). */
let servedRequestId: string | undefined;

/** From now on, this workflow's activities and log lines serve this request (a command's). */
export function serveRequest(requestId: string): void {
  servedRequestId = requestId;
}

function requestId(): string | undefined {
  if (servedRequestId) return servedRequestId;
  const value = workflowInfo().memo?.request_id;
  return typeof value === 'string' ? value : undefined;
}

function summaryOf(activityType: string): string | undefined {
  return (activitySummaries as Record<string, string>)[activityType];
}

const propagateRequestId: WorkflowOutboundCallsInterceptor = {
  async scheduleActivity(input, next) {
    const id = requestId();
    const withSummary = { ...input, options: { summary: summaryOf(input.activityType), ...input.options } };
    return next(id ? { ...withSummary, headers: { ...input.headers, [REQUEST_ID_HEADER]: defaultPayloadConverter.toPayload(id) } } : withSummary);
  },
  async scheduleLocalActivity(input, next) {
    const id = requestId();
    const withSummary = { ...input, options: { summary: summaryOf(input.activityType), ...input.options } };
    return next(id ? { ...withSummary, headers: { ...input.headers, [REQUEST_ID_HEADER]: defaultPayloadConverter.toPayload(id) } } : withSummary);
  },
  getLogAttributes(input, next) {
    const id = requestId();
    return next(id ? { ...input, request_id: id } : input);
  },
};

/*
 * Only the run itself gets a span in the isolate. OpenTelemetry's interceptors also wrap each
 * handler and each activity's scheduling in promises of their own, so a step's result or a
 * handler's end reaches the workflow a few microtasks later than without them, and a coroutine
 * can issue its commands after another one's instead of before: the dispute workflow (not
 * pinned: its runs move to new code) recorded a report's and a command's steps in one order
 * that the wrapped code replays in the other. So signals, updates and queries pass through
 * untraced (the client's span of each stays in the caller's trace), and an activity gets the
 * run's context in its headers synchronously, with no span of the scheduling between.
 */

/**
 * Whether this run is traced: its start carried a trace context (the client traced it). A run
 * started untraced (tracing off) opens no span and puts no trace header on its activities, so
 * its history is what it would be without these interceptors. Per run, as servedRequestId.
 */
let traced = false;

/** The run's span, continued from the start's headers; none when the start carried no context. */
class RunTraced extends OpenTelemetryInboundInterceptor {
  override execute(input: WorkflowExecuteInput, next: Next<WorkflowInboundCallsInterceptor, 'execute'>) {
    if (input.headers[TRACE_HEADER] === undefined) return next(input);
    traced = true;
    return super.execute(input, next);
  }
  override handleSignal(input: SignalInput, next: Next<WorkflowInboundCallsInterceptor, 'handleSignal'>) {
    return next(input);
  }
  override handleUpdate(input: UpdateInput, next: Next<WorkflowInboundCallsInterceptor, 'handleUpdate'>) {
    return next(input);
  }
  override validateUpdate(input: UpdateInput, next: Next<WorkflowInboundCallsInterceptor, 'validateUpdate'>) {
    next(input);
  }
  override handleQuery(input: QueryInput, next: Next<WorkflowInboundCallsInterceptor, 'handleQuery'>) {
    return next(input);
  }
}

/** The run's trace context handed to each activity (its RunActivity span is the run span's child); the trace ids in log lines. */
class ContextToActivities extends OpenTelemetryOutboundInterceptor {
  override scheduleActivity(input: ActivityInput, next: Next<WorkflowOutboundCallsInterceptor, 'scheduleActivity'>) {
    return next(traced ? { ...input, headers: headersWithContext(input.headers) } : input);
  }
  override scheduleLocalActivity(input: LocalActivityInput, next: Next<WorkflowOutboundCallsInterceptor, 'scheduleLocalActivity'>) {
    return next(traced ? { ...input, headers: headersWithContext(input.headers) } : input);
  }
}

export const interceptors: WorkflowInterceptorsFactory = () => ({
  inbound: [new RunTraced()],
  outbound: [propagateRequestId, new ContextToActivities()],
  internals: [new OpenTelemetryInternalsInterceptor()],
});
