import type postgres from 'postgres';
import type { Db } from './connect';

/**
 * A page of a newest-first list. `startingAfter` continues after that object (older ones);
 * `endingBefore` is the page just before it (newer ones), still listed newest first: the
 * two cursors walk the same list in both directions.
 */
export interface PageQuery {
  limit: number;
  startingAfter?: string;
  endingBefore?: string;
}

export interface Page<T> {
  rows: T[];
  /** More objects beyond this page in the direction of travel. */
  hasMore: boolean;
}

/**
 * The WHERE tail, ORDER BY and LIMIT of a keyset page over `column`, which grows with
 * creation time. `position` turns a cursor id into that column's value (the id itself, or a
 * subquery for tables ordered by a sequence). Fetches one row more than the page, to know
 * whether there is more; `toPage` trims and orders it.
 */
export function keysetPage(db: Db, column: string, query: PageQuery, position: (cursor: string) => postgres.PendingQuery<postgres.Row[]> | string = (cursor) => cursor): postgres.PendingQuery<postgres.Row[]> {
  const after = query.startingAfter !== undefined ? db`AND ${db(column)} < ${position(query.startingAfter) as never}` : db``;
  const before = query.endingBefore !== undefined ? db`AND ${db(column)} > ${position(query.endingBefore) as never}` : db``;
  // Walking towards newer objects reads them oldest first from the cursor, then flips the page.
  const direction = query.endingBefore !== undefined ? db`ASC` : db`DESC`;
  return db`${after} ${before} ORDER BY ${db(column)} ${direction} LIMIT ${query.limit + 1}`;
}

export function toPage<T>(rows: T[], query: PageQuery): Page<T> {
  const page = rows.slice(0, query.limit);
  return { rows: query.endingBefore !== undefined ? page.reverse() : page, hasMore: rows.length > query.limit };
}
