import { ApiError } from '../../domain/errors';
import { looksLikeId } from '../../domain/ids';
import { paymentStatuses } from '../../domain/payments';
import type { PaymentSearch } from '../../db/console';
import type { ConsoleSignedIn } from '../context';
import type { SearchForm } from './payment-pages';

/** The payments page's query string, read into a search (400 for what cannot be one, before any query runs). */

export const PAGE_SIZE = 50;

const fields = ['payment_id', 'order_id', 'customer', 'provider', 'status', 'tenant_id', 'from', 'to'] as const;

function utcDay(value: string, field: string): Date {
  const day = /^\d{4}-\d{2}-\d{2}$/.test(value) ? new Date(`${value}T00:00:00Z`) : null;
  if (!day || Number.isNaN(day.getTime())) throw new ApiError('invalid_request', `${field}: a day as YYYY-MM-DD.`);
  return day;
}

function cursor(value: string | undefined, field: string): string | undefined {
  if (value === undefined || value === '') return undefined;
  if (!looksLikeId('pay', value)) throw new ApiError('invalid_request', `${field}: a payment id.`);
  return value;
}

export function parseSearch(query: Record<string, string>, operator: ConsoleSignedIn): { form: SearchForm; search: PaymentSearch } {
  const form: SearchForm = {};
  for (const field of fields) {
    const value = query[field]?.trim();
    if (value === undefined || value === '') continue;
    // Control characters (a NUL) cannot be stored, so nothing holds them: refused rather than sent to PostgreSQL.
    if (value.length > 255 || /[\u0000-\u001f\u007f]/.test(value)) throw new ApiError('invalid_request', `${field}: at most 255 characters, no control characters.`);
    form[field] = value;
  }
  if (operator.tenantId !== null) delete form.tenant_id;
  if (form.status !== undefined && !(paymentStatuses as string[]).includes(form.status)) throw new ApiError('invalid_request', `status: one of ${paymentStatuses.join(', ')}.`);
  const customer = form.customer;
  if (customer !== undefined && !looksLikeId('cus', customer) && !customer.includes('@')) throw new ApiError('invalid_request', 'customer: a cus_ id or an email.');
  const to = form.to !== undefined ? utcDay(form.to, 'to') : undefined;
  const search: PaymentSearch = {
    limit: PAGE_SIZE,
    startingAfter: cursor(query.starting_after, 'starting_after'),
    endingBefore: cursor(query.ending_before, 'ending_before'),
    tenantId: operator.tenantId ?? form.tenant_id,
    paymentId: form.payment_id,
    orderId: form.order_id,
    customerId: customer !== undefined && looksLikeId('cus', customer) ? customer : undefined,
    customerEmail: customer !== undefined && !looksLikeId('cus', customer) ? customer : undefined,
    provider: form.provider,
    status: form.status,
    from: form.from !== undefined ? utcDay(form.from, 'from') : undefined,
    // The last day given is included: before the next one.
    to: to && new Date(to.getTime() + 24 * 60 * 60 * 1000),
  };
  // Absent filters are left out, not sent as undefined.
  for (const key of Object.keys(search) as (keyof PaymentSearch)[]) if (search[key] === undefined) delete search[key];
  return { form, search };
}
