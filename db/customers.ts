import type { Db } from './connect';
import type { CustomerRow } from '../domain/resources';

/** Creates a customer of the tenant (POST /v1/customers, inside its idempotency transaction). */
export async function insertCustomer(db: Db, customer: { id: string; tenantId: string; email: string | null; name: string | null; metadata: Record<string, string> }): Promise<CustomerRow> {
  const [row] = await db<CustomerRow[]>`
    INSERT INTO customers (id, tenant_id, email, name, metadata)
    VALUES (${customer.id}, ${customer.tenantId}, ${customer.email}, ${customer.name}, ${db.json(customer.metadata)})
    RETURNING *`;
  return row!;
}

/** The tenant's customer, or null (another tenant's included). */
export async function getCustomer(db: Db, tenantId: string, id: string): Promise<CustomerRow | null> {
  const [row] = await db<CustomerRow[]>`SELECT * FROM customers WHERE id = ${id} AND tenant_id = ${tenantId}`;
  return row ?? null;
}
