import { defaultPayloadConverter } from '@temporalio/common';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import { REQUEST_ID_HEADER } from '../shared/definitions';

/**
 * Puts the request id that the workflow passed in the activity's headers on every log line
 * the activity writes (`log` from @temporalio/activity). A request id in the activity's own
 * input (e.g. a capture request's) takes precedence: it names the request being served.
 */
export const requestIdActivityInterceptor: ActivityInterceptorsFactory = () => {
  let requestId: string | undefined;
  return {
    inbound: {
      async execute(input, next) {
        const header = input.headers[REQUEST_ID_HEADER];
        const fromHeader = header ? defaultPayloadConverter.fromPayload<string>(header) : undefined;
        const arg = input.args[0] as { requestId?: unknown; request?: { requestId?: unknown }; payment?: { requestId?: unknown } } | undefined;
        const fromInput = arg?.request?.requestId ?? arg?.payment?.requestId ?? arg?.requestId;
        requestId = typeof fromInput === 'string' ? fromInput : fromHeader;
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
