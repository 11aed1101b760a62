/**
 * Carries the request id of the HTTP request that started the workflow (the memo's
 * request_id, set by the API) into every workflow log line and, as a header, into every
 * activity it schedules. No commands are added, so histories are unaffected.
 */
import { defaultPayloadConverter } from '@temporalio/common';
import { workflowInfo, type WorkflowInterceptorsFactory, type WorkflowOutboundCallsInterceptor } from '@temporalio/workflow';
import { REQUEST_ID_HEADER } from '../shared/definitions';

function requestId(): string | undefined {
  const value = workflowInfo().memo?.request_id;
  return typeof value === 'string' ? value : undefined;
}

const propagateRequestId: WorkflowOutboundCallsInterceptor = {
  async scheduleActivity(input, next) {
    const id = requestId();
    return next(id ? { ...input, headers: { ...input.headers, [REQUEST_ID_HEADER]: defaultPayloadConverter.toPayload(id) } } : input);
  },
  async scheduleLocalActivity(input, next) {
    const id = requestId();
    return next(id ? { ...input, headers: { ...input.headers, [REQUEST_ID_HEADER]: defaultPayloadConverter.toPayload(id) } } : input);
  },
  getLogAttributes(input, next) {
    const id = requestId();
    return next(id ? { ...input, request_id: id } : input);
  },
};

export const interceptors: WorkflowInterceptorsFactory = () => ({ outbound: [propagateRequestId] });
