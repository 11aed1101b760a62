/**
 * What the bench's load generator, scenarios and database probes share. A leaf: it imports no
 * other bench module, so they can all import it without importing each other.
 */
import type { OutgoingHttpHeaders } from 'node:http';

/** JSON request headers for `body`, computed once per request shape rather than per request. */
export function jsonHeaders(headers: Record<string, string>, body: Buffer): OutgoingHttpHeaders {
  return { ...headers, 'content-type': 'application/json', 'content-length': body.length };
}

/** The tables a lane's history lives in (the ones seedHistory grows). */
export const historyTables = ['payments', 'idempotency_records', 'ledger_transactions', 'ledger_entries', 'outbox_events'];
