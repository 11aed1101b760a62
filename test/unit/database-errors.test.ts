import { describe, expect, it } from 'vitest';
import { isDatabaseUnavailable, isDroppedTypesQueryFailure } from '../../db/connect';

/**
 * db/connect.ts: which unhandled rejections a process survives (postgres.js's dropped
 * per-connection types query during an outage) and which still end it.
 */
const typesQuery = `
      select b.oid, b.typarray
      from pg_catalog.pg_type a
      left join pg_catalog.pg_type b on b.oid = a.typelem
      where a.typcategory = 'A'
      group by b.oid, b.typarray
      order by b.oid
    `;
const failure = (fields: Record<string, unknown>) => Object.assign(new Error('write CONNECTION_CLOSED 127.0.0.1:5432'), fields);

describe('isDroppedTypesQueryFailure', () => {
  it('is the driver types query lost to an outage, and nothing else (rules out swallowing a real bug or a caller\'s failed statement)', () => {
    expect(isDroppedTypesQueryFailure(failure({ code: 'CONNECTION_CLOSED', query: typesQuery }))).toBe(true);
    expect(isDroppedTypesQueryFailure(failure({ code: '57P01', query: typesQuery }))).toBe(true);
    // The same query failing for another reason (a cancel, a syntax change): not an outage.
    expect(isDroppedTypesQueryFailure(failure({ code: '57014', query: typesQuery }))).toBe(false);
    // Our own statements during the outage: their callers handle them.
    expect(isDroppedTypesQueryFailure(failure({ code: 'CONNECTION_CLOSED', query: 'SELECT * FROM payments WHERE id = $1' }))).toBe(false);
    expect(isDroppedTypesQueryFailure(new TypeError('undefined is not a function'))).toBe(false);
    expect(isDroppedTypesQueryFailure(undefined)).toBe(false);
    expect(isDatabaseUnavailable(failure({ code: 'CONNECTION_CLOSED' }))).toBe(true);
  });
});
