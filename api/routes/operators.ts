import { createRoute, OpenAPIHono, z } from '@hono/zod-openapi';
import type { ApiDeps, AppEnv } from '../context';
import { createOperator, disableOperatorById, operatorResource, resetOperatorPassword } from '../console/operators';
import { listOperators } from '../../db/operators';
import { CreateOperatorBody, IdParam, Operator, OperatorPasswordBody } from '../schemas';
import { errorResponses, jsonContent } from './openapi';

const operatorIdExample = 'opr_01jd6w8b3m4x0c2q7yk5h9t1ve';

const createOperatorRoute = createRoute({
  method: 'post',
  path: '/admin/operators',
  tags: ['Admin'],
  summary: 'Create a console operator (admin token)',
  security: [{ adminToken: [] }],
  description: 'An operator signs in to /console with the email and password. A `viewer` reads only; an `operator` may refund. With `tenant_id` the operator sees that tenant only. 409 `operator_email_taken` if the email exists.',
  request: { body: { content: jsonContent(CreateOperatorBody), required: true } },
  responses: { 201: { description: 'The operator.', content: jsonContent(Operator) }, ...errorResponses(['invalid_request', 'unauthorized', 'operator_email_taken', 'unsupported_media_type', 'payload_too_large']) },
});

const listOperatorsRoute = createRoute({
  method: 'get',
  path: '/admin/operators',
  tags: ['Admin'],
  summary: 'List the console operators (admin token)',
  security: [{ adminToken: [] }],
  responses: {
    200: { description: 'Every operator, oldest first.', content: jsonContent(z.object({ object: z.literal('list'), data: z.array(Operator), has_more: z.boolean() }).openapi('OperatorList')) },
    ...errorResponses(['unauthorized']),
  },
});

const disableOperatorRoute = createRoute({
  method: 'post',
  path: '/admin/operators/{id}/disable',
  tags: ['Admin'],
  summary: 'Disable a console operator: every session ends at once (admin token)',
  security: [{ adminToken: [] }],
  request: { params: IdParam('operator', operatorIdExample) },
  responses: { 200: { description: 'The operator, disabled.', content: jsonContent(Operator) }, ...errorResponses(['unauthorized', 'not_found']) },
});

const operatorPasswordRoute = createRoute({
  method: 'post',
  path: '/admin/operators/{id}/password',
  tags: ['Admin'],
  summary: "Set a console operator's password: every session ends at once (admin token)",
  security: [{ adminToken: [] }],
  request: { params: IdParam('operator', operatorIdExample), body: { content: jsonContent(OperatorPasswordBody), required: true } },
  responses: { 200: { description: 'The operator.', content: jsonContent(Operator) }, ...errorResponses(['invalid_request', 'unauthorized', 'not_found', 'unsupported_media_type', 'payload_too_large']) },
});

/** /admin/operators: the console's operators, managed with the admin token (api/console/operators.ts does the work). */
export function operatorRoutes(deps: ApiDeps) {
  const app = new OpenAPIHono<AppEnv>();
  app.openapi(createOperatorRoute, async (c) => c.json(operatorResource(await createOperator(deps, c.req.valid('json'))), 201));
  app.openapi(listOperatorsRoute, async (c) => c.json({ object: 'list' as const, data: (await listOperators(deps.sql)).map(operatorResource), has_more: false }, 200));
  app.openapi(disableOperatorRoute, async (c) => c.json(operatorResource(await disableOperatorById(deps, c.req.valid('param').id)), 200));
  app.openapi(operatorPasswordRoute, async (c) => c.json(operatorResource(await resetOperatorPassword(deps, c.req.valid('param').id, c.req.valid('json').password)), 200));
  return app;
}
