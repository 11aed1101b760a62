import { defaultPayloadConverter } from '@temporalio/common';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import { REQUEST_ID_HEADER } from '../shared/definitions';

/**
 * Puts the request id that the workflow passed in the activity's header on every log line
 * the activity writes (`log` from @temporalio/activity). The workflow says which request an
 * activity serves (workflows/interceptors.ts: the starting request, or a capture's or
 * cancel's once it serves that command); the activity's input is never searched for one.
 */
export const requestIdActivityInterceptor: ActivityInterceptorsFactory = () => {
  let requestId: string | undefined;
  return {
    inbound: {
      async execute(input, next) {
        const header = input.headers[REQUEST_ID_HEADER];
        requestId = header ? defaultPayloadConverter.fromPayload<string>(header) : undefined;
        return next(input);
      },
    },
    outbound: {
      getLogAttributes(input, next) {
        return next(requestId ? { ...input, request_id: requestId } : input);
      },
    },
  };
};
