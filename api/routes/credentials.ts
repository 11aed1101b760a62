import { createRoute, OpenAPIHono } from '@hono/zod-openapi';
import { generateApiKey, insertApiKey, listApiKeys, revokeApiKey, rotateWebhookSecret, type ApiKeyRow } from '../../db/credentials';
import { ApiError } from '../../domain/errors';
import { tenantExists } from '../../db/tenants';
import type { ApiDeps, AppEnv } from '../context';
import { ApiKey, CreateApiKeyBody, CreatedApiKey, IdParam, ListApiKeysQuery, listOf, RotatedWebhookSecret, RotateWebhookSecretBody, TenantKeyParams } from '../schemas';
import { errorResponses, jsonContent, optionalBody } from './openapi';

/** A tenant's credentials: several API keys, each revocable, and its webhook signing secret. */

const tenantParam = IdParam('tenant', 'ten_01jd6w8b3m4x0c2q7yk5h9t1ve');
const adminSecurity = [{ adminToken: [] }];

const createKeyRoute = createRoute({
  method: 'post',
  path: '/admin/tenants/{id}/api_keys',
  tags: ['Admin'],
  summary: 'Create another API key for a tenant (admin token)',
  description: 'The key is shown once; only its SHA-256 is stored. Existing keys keep working: rotate by creating a key, moving clients to it, then revoking the old one.',
  security: adminSecurity,
  request: { params: tenantParam, body: { content: jsonContent(CreateApiKeyBody), required: false } },
  responses: { 201: { description: 'The key, with its secret.', content: jsonContent(CreatedApiKey) }, ...errorResponses(['invalid_request', 'unauthorized', 'not_found', 'unsupported_media_type', 'payload_too_large']) },
});

const listKeysRoute = createRoute({
  method: 'get',
  path: '/admin/tenants/{id}/api_keys',
  tags: ['Admin'],
  summary: "List a tenant's API keys (admin token)",
  description:
    'Id, prefix, creation, last use and revocation of each key; never the key itself. All of the tenant’s keys in one page, oldest first ' +
    '(`has_more` is false): the list takes no query parameters, and any (`limit`, a cursor, another) is 400 `invalid_request` naming it.',
  security: adminSecurity,
  request: { params: tenantParam, query: ListApiKeysQuery },
  responses: { 200: { description: 'The keys, oldest first.', content: jsonContent(listOf(ApiKey, 'ApiKeyList')) }, ...errorResponses(['invalid_request', 'unauthorized', 'not_found']) },
});

const revokeKeyRoute = createRoute({
  method: 'delete',
  path: '/admin/tenants/{id}/api_keys/{key_id}',
  tags: ['Admin'],
  summary: 'Revoke an API key (admin token)',
  description: 'Every API process refuses the key within 5 seconds (their key cache lives 2 s). Revoking twice is harmless.',
  security: adminSecurity,
  request: { params: TenantKeyParams },
  responses: { 200: { description: 'The revoked key.', content: jsonContent(ApiKey) }, ...errorResponses(['invalid_request', 'unauthorized', 'not_found']) },
});

const rotateSecretRoute = createRoute({
  method: 'post',
  path: '/admin/tenants/{id}/webhook_secret/rotate',
  tags: ['Admin'],
  summary: "Rotate a tenant's webhook signing secret (admin token)",
  description:
    'Returns the new secret. For `overlap_seconds` (default 24 h) every delivery carries two signatures in `webhook-signature` ' +
    '(Standard Webhooks: space-separated), one per secret, so receivers verify with either; then the new one alone.',
  security: adminSecurity,
  request: { params: tenantParam, body: { content: jsonContent(RotateWebhookSecretBody), required: false } },
  responses: { 200: { description: 'The new secret.', content: jsonContent(RotatedWebhookSecret) }, ...errorResponses(['invalid_request', 'unauthorized', 'not_found', 'unsupported_media_type', 'payload_too_large']) },
});

function apiKeyResource(row: ApiKeyRow) {
  return {
    id: row.id,
    object: 'api_key' as const,
    prefix: row.prefix,
    created_at: row.created_at.toISOString(),
    last_used_at: row.last_used_at?.toISOString() ?? null,
    revoked_at: row.revoked_at?.toISOString() ?? null,
  };
}

export function credentialRoutes(deps: ApiDeps) {
  const app = new OpenAPIHono<AppEnv>();

  async function existingTenant(id: string): Promise<string> {
    if (!(await tenantExists(deps.sql, id))) throw new ApiError('not_found', `No such tenant: ${id}`);
    return id;
  }

  app.openapi(createKeyRoute, async (c) => {
    optionalBody(CreateApiKeyBody, c.req.valid('json'));
    const tenantId = await existingTenant(c.req.valid('param').id);
    const apiKey = generateApiKey();
    const row = await insertApiKey(deps.sql, tenantId, apiKey);
    c.var.logger.info({ tenant_id: tenantId, api_key_id: row.id }, 'api key created');
    return c.json({ ...apiKeyResource(row), api_key: apiKey }, 201);
  });

  app.openapi(listKeysRoute, async (c) => {
    const tenantId = await existingTenant(c.req.valid('param').id);
    return c.json({ object: 'list' as const, data: (await listApiKeys(deps.sql, tenantId)).map(apiKeyResource), has_more: false }, 200);
  });

  app.openapi(revokeKeyRoute, async (c) => {
    const { id, key_id: keyId } = c.req.valid('param');
    const row = await revokeApiKey(deps.sql, id, keyId);
    if (!row) throw new ApiError('not_found', `No such API key: ${keyId} (tenant ${id})`);
    c.var.logger.info({ tenant_id: id, api_key_id: keyId }, 'api key revoked');
    return c.json(apiKeyResource(row), 200);
  });

  app.openapi(rotateSecretRoute, async (c) => {
    const { id } = c.req.valid('param');
    const body = optionalBody(RotateWebhookSecretBody, c.req.valid('json'));
    const rotated = await rotateWebhookSecret(deps.sql, id, body.overlap_seconds);
    if (!rotated) throw new ApiError('not_found', `No such tenant: ${id}`);
    c.var.logger.info({ tenant_id: id, overlap_seconds: body.overlap_seconds }, 'webhook secret rotated');
    return c.json({ object: 'webhook_secret' as const, webhook_secret: rotated.secret, previous_secret_valid_until: rotated.previousValidUntil.toISOString() }, 200);
  });

  return app;
}
