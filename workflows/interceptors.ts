/**
 * Carries the id of the HTTP request a workflow serves into every workflow log line and, as a
 * header, into every activity it schedules: the request that started the workflow (the memo's
 * request_id, set by the API), until the workflow says it serves another one (a capture or
 * cancel command: `serveRequest`). The activity side (worker/interceptors.ts) reads only that
 * header, never the activity's input. Also gives every activity its summary
 * (workflows/activities.ts). Headers are not part of what replay compares, so the recorded
 * histories still replay (the replay tests hold histories recorded before the summaries existed).
 */
import { defaultPayloadConverter } from '@temporalio/common';
import { workflowInfo, type WorkflowInterceptorsFactory, type WorkflowOutboundCallsInterceptor } from '@temporalio/workflow';
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

export const interceptors: WorkflowInterceptorsFactory = () => ({ outbound: [propagateRequestId] });
