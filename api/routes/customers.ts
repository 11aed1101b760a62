import { createRoute, OpenAPIHono } from '@hono/zod-openapi';
import { getCustomer, insertCustomer } from '../../db/customers';
import { listCustomerPaymentMethods } from '../../db/customers-payment-methods';
import { ApiError } from '../../domain/errors';
import { looksLikeId, newId } from '../../domain/ids';
import { customerResource, paymentMethodResource, type CustomerRow } from '../../domain/resources';
import type { Db } from '../../db/connect';
import type { ApiDeps, AppEnv } from '../context';
import { runTransactional } from '../idempotency';
import { finalResponse, recordedReply } from '../typed-route';
import { CreateCustomerBody, Customer, IdParam, ListPaymentMethodsQuery, listOf, PaymentMethod } from '../schemas';
import { errorResponses, idempotencyKeyParameter, idempotentResponses, jsonContent } from './openapi';

const customerIdExample = 'cus_01jd6w8b3m4x0c2q7yk5h9t1ve';

export const createCustomerRoute = createRoute({
  method: 'post',
  path: '/v1/customers',
  tags: ['Customers'],
  summary: 'Create a customer (idempotent)',
  description: 'A customer whose cards can be saved (`setup_future_usage` on a payment) and charged later without them (`off_session`).',
  parameters: [idempotencyKeyParameter],
  request: { body: { content: jsonContent(CreateCustomerBody), required: true } },
  responses: {
    201: { description: 'The customer.', content: jsonContent(Customer), headers: idempotentResponses.headers },
    ...errorResponses(['invalid_request', 'idempotency_key_missing', 'idempotency_key_invalid', 'unauthorized', 'payload_too_large', 'unsupported_media_type', 'idempotency_key_reused', 'service_unavailable']),
  },
});

const getCustomerRoute = createRoute({
  method: 'get',
  path: '/v1/customers/{id}',
  tags: ['Customers'],
  summary: 'Retrieve a customer',
  request: { params: IdParam('customer', customerIdExample) },
  responses: { 200: { description: 'The customer.', content: jsonContent(Customer) }, ...errorResponses(['unauthorized', 'not_found']) },
});

const listCustomerPaymentMethodsRoute = createRoute({
  method: 'get',
  path: '/v1/customers/{id}/payment_methods',
  tags: ['Customers'],
  summary: "A customer's saved payment methods, newest first",
  description: 'The methods attached to the customer (a detached one is no longer listed).',
  request: { params: IdParam('customer', customerIdExample), query: ListPaymentMethodsQuery },
  responses: { 200: { description: 'A page of payment methods.', content: jsonContent(listOf(PaymentMethod, 'PaymentMethodList')) }, ...errorResponses(['invalid_request', 'unauthorized', 'not_found']) },
});

/** The tenant's customer, or 404 (another tenant's and malformed ids alike). */
export async function tenantCustomer(db: Db, tenantId: string, id: string): Promise<CustomerRow> {
  const customer = looksLikeId('cus', id) ? await getCustomer(db, tenantId, id) : null;
  if (!customer) throw new ApiError('not_found', `No such customer: ${id}`);
  return customer;
}

export function customerRoutes(deps: ApiDeps) {
  const app = new OpenAPIHono<AppEnv>();

  app.openapi(createCustomerRoute, async (c) => {
    const body = c.req.valid('json');
    const tenantId = c.var.tenant.id;
    const id = newId('cus');
    return recordedReply(c, createCustomerRoute, await runTransactional(c, deps, createCustomerRoute, {
      params: {},
      body,
      resourceId: id,
      execute: async (tx) => {
        const customer = await insertCustomer(tx, { id, tenantId, email: body.email, name: body.name, metadata: body.metadata });
        return finalResponse(createCustomerRoute, 201, customerResource(customer), `/v1/customers/${customer.id}`);
      },
    }));
  });

  app.openapi(getCustomerRoute, async (c) => {
    const customer = await tenantCustomer(deps.sql, c.var.tenant.id, c.req.valid('param').id);
    return c.json(customerResource(customer), 200);
  });

  app.openapi(listCustomerPaymentMethodsRoute, async (c) => {
    const customer = await tenantCustomer(deps.sql, c.var.tenant.id, c.req.valid('param').id);
    const query = c.req.valid('query');
    const page = await listCustomerPaymentMethods(deps.sql, customer.tenant_id, customer.id, { limit: query.limit, startingAfter: query.starting_after, endingBefore: query.ending_before });
    return c.json({ object: 'list' as const, data: page.rows.map(paymentMethodResource), has_more: page.hasMore }, 200);
  });

  return app;
}
