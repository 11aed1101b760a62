import type { z } from '@hono/zod-openapi';
import { disableOperator, insertAudit, insertOperator, setOperatorPassword, type OperatorRow } from '../../db/operators';
import { tenantExists } from '../../db/tenants';
import { ApiError } from '../../domain/errors';
import type { ApiDeps } from '../context';
import type { CreateOperatorBody } from '../schemas';
import { hashPassword } from './passwords';

/** What the admin token does to operators (POST/GET /admin/operators…), each change audited as the admin's. */

export function operatorResource(row: OperatorRow) {
  return {
    id: row.id,
    object: 'operator' as const,
    email: row.email,
    role: row.role,
    tenant_id: row.tenant_id,
    disabled: row.disabled_at !== null,
    password_changed_at: row.password_changed_at.toISOString(),
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

const adminAudit = (deps: ApiDeps, action: string, row: OperatorRow) =>
  insertAudit(deps.sql, { actor: 'admin', actorEmail: null, action, objectType: 'operator', objectId: row.id, tenantId: row.tenant_id, state: 'done', outcome: { email: row.email, role: row.role } });

export async function createOperator(deps: ApiDeps, body: z.output<typeof CreateOperatorBody>): Promise<OperatorRow> {
  const tenantId = body.tenant_id ?? null;
  if (tenantId !== null && !(await tenantExists(deps.sql, tenantId))) {
    throw new ApiError('invalid_request', `No such tenant: ${tenantId}`, { issues: [{ path: 'tenant_id', code: 'unknown_tenant', message: 'no such tenant' }] });
  }
  const row = await insertOperator(deps.sql, { email: body.email, role: body.role, tenantId, passwordHash: await hashPassword(body.password) });
  if (!row) throw new ApiError('operator_email_taken', `An operator with email ${body.email} already exists.`);
  await adminAudit(deps, 'operator.create', row);
  return row;
}

export async function disableOperatorById(deps: ApiDeps, id: string): Promise<OperatorRow> {
  const row = await disableOperator(deps.sql, id);
  if (!row) throw new ApiError('not_found', `No such operator: ${id}`);
  await adminAudit(deps, 'operator.disable', row);
  return row;
}

export async function resetOperatorPassword(deps: ApiDeps, id: string, password: string): Promise<OperatorRow> {
  const row = await setOperatorPassword(deps.sql, id, await hashPassword(password));
  if (!row) throw new ApiError('not_found', `No such operator: ${id}`);
  await adminAudit(deps, 'operator.password', row);
  return row;
}
