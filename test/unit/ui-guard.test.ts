import { describe, expect, it } from 'vitest';
import { readOnlyAllows } from '../../lib/ui-guard';

/**
 * The read-only Web UI's rule (lib/ui-guard.ts), on request targets as sent. The UI server
 * resolves dot segments and fragments before it routes, so only a target whose every segment
 * routes as written may pass. The real UI behind the guard: test/integration/temporal-ui-guard.test.ts.
 */

const query = '/api/v1/namespaces/default/workflows';

describe('readOnlyAllows', () => {
  it("admits GET, HEAD and the UI's workflow query call, as the UI sends it", () => {
    const admitted: [string, string][] = [
      ['GET', '/'],
      ['GET', `${query}/payment-t1-k.order-1`],
      ['HEAD', '/api/v1/settings'],
      ['POST', `${query}/payment-t1-k.order-1/query/__stack_trace`],
      ['POST', `${query}/payment-t1-k.order-1/query/paymentStatus?trace=1`],
      ['POST', `${query}/${encodeURIComponent('payment-t1-k.a:b')}/query/__temporal_workflow_metadata`],
      ['POST', `/api/v1/namespaces/payments-prod/workflows/${encodeURIComponent('refund-t 1-ü')}/query/paymentStatus`],
    ];
    expect(admitted.filter(([method, target]) => !readOnlyAllows(method, target))).toEqual([]);
  });

  it('refuses every other method and every POST whose path is not exactly the query route', () => {
    const id = 'payment-t1-k.order-1';
    const refused: [string, string][] = [
      ['PUT', `${query}/${id}/query/q`],
      ['DELETE', `/api/v1/namespaces/default/schedules/s1`],
      ['OPTIONS', `${query}/${id}/query/q`],
      ['PATCH', `${query}/${id}/query/q`],
      ['POST', `${query}/${id}/terminate`],
      ['POST', `${query}/${id}/signal/query`],
      ['POST', `${query}/query/terminate`],
      ['POST', `/api/v1/namespaces/query/workflows/${id}/terminate`],
      ['POST', `${query}/${id}/signal-with-start/query%2F`],
      ['POST', `${query}/${id}/query/../terminate`],
      ['POST', `${query}/${id}/query/x/../../terminate`],
      ['POST', `${query}/${id}/query/./q`],
      ['POST', `${query}/${id}/query/...`],
      ['POST', `${query}/${id}/query/%2e%2e/terminate`],
      ['POST', `${query}/${id}/query/%2E%2E%2Fterminate`],
      ['POST', `${query}/${id}/query/..%2fterminate`],
      ['POST', `${query}/${id}/query/.%2e/terminate`],
      ['POST', `${query}/${id}/query/%2e`],
      ['POST', `${query}/${id}/query/a%2eb`],
      ['POST', `${query}/${id}/query/%252e%252e`],
      ['POST', `${query}/${id}/query/..\\terminate`],
      ['POST', `${query}/${id}/query/%5c..%5Cterminate`],
      ['POST', `${query}/${id}/query/%C0%AE%C0%AE`],
      ['POST', `${query}/${id}/query/q%00`],
      ['POST', `${query}/${id}/query/q%zz`],
      ['POST', `${query}/${id}/query/q%2`],
      ['POST', `${query}/${id}/query//../terminate`],
      ['POST', `${query}/${id}/query/`],
      ['POST', `${query}/${id}/query/q/`],
      ['POST', `${query}/${id}/query/q/..`],
      ['POST', `${query}/${id}//query/q`],
      ['POST', `/${query}/${id}/query/q`],
      ['POST', `${query}/${id}/terminate#/query/q`],
      ['POST', `${query}/${id}/query/q#/../../terminate`],
      ['POST', `${query}/${id}/query/q w`],
      ['POST', `http://127.0.0.1:8233${query}/${id}/query/q`],
      ['POST', `/API/v1/namespaces/default/workflows/${id}/query/q`],
      ['POST', `${query}/${id}/Query/q`],
    ];
    expect(refused.filter(([method, target]) => readOnlyAllows(method, target))).toEqual([]);
  });
});
