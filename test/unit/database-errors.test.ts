import { describe, expect, it } from 'vitest';
import { isDatabaseUnavailable } from '../../db/connect';

/** db/connect.ts: which errors mean "PostgreSQL cannot be reached" (a 503 at the API, a retried activity). */
const failure = (fields: Record<string, unknown>) => Object.assign(new Error('write CONNECTION_CLOSED 127.0.0.1:5432'), fields);

describe('isDatabaseUnavailable', () => {
  it('is a lost or refused connection, and not a statement PostgreSQL refused (rules out retrying a real bug as an outage)', () => {
    expect(isDatabaseUnavailable(failure({ code: 'CONNECTION_CLOSED' }))).toBe(true);
    expect(isDatabaseUnavailable(failure({ code: 'ECONNREFUSED' }))).toBe(true);
    // The backend terminated (an administrator, a restart) and too many connections.
    expect(isDatabaseUnavailable(failure({ code: '57P01' }))).toBe(true);
    expect(isDatabaseUnavailable(failure({ code: '53300' }))).toBe(true);
    // A cancelled statement, a constraint, a syntax error: PostgreSQL answered.
    expect(isDatabaseUnavailable(failure({ code: '57014' }))).toBe(false);
    expect(isDatabaseUnavailable(failure({ code: '23505' }))).toBe(false);
    expect(isDatabaseUnavailable(failure({ code: '42601' }))).toBe(false);
    // A gRPC error's numeric code is not a database one.
    expect(isDatabaseUnavailable(failure({ code: 14 }))).toBe(false);
    expect(isDatabaseUnavailable(new TypeError('undefined is not a function'))).toBe(false);
    expect(isDatabaseUnavailable(undefined)).toBe(false);
  });
});
