/**
 * Carries the request id of the HTTP request that started the workflow (the memo's
 * request_id, set by the API) into every workflow log line and, as a header, into every
 * activity it schedules; and gives every activity its summary (workflows/activities.ts).
 * No commands are added, removed or reordered, so the recorded histories still replay (the
 * replay tests hold histories recorded before the summaries existed).
 */
import { defaultPayloadConverter } from '@temporalio/common';
import { workflowInfo, type WorkflowInterceptorsFactory, type WorkflowOutboundCallsInterceptor } from '@temporalio/workflow';
import { REQUEST_ID_HEADER } from '../shared/definitions';
import { activitySummaries } from './activities';

function requestId(): string | undefined {
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
