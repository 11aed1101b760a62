import { isCurrency, minorFromDecimal } from '../../domain/money';
import { ProviderRejectedError, ProviderReportUnreadableError, ProviderUnavailableError, type CallOptions, type ProviderBalanceTransaction } from '../types';

/**
 * Adyen's Settlement details report: one CSV per settlement (payable) batch, numbered from 1 per
 * merchant account, made when the batch closes, downloaded over HTTPS from the report host with
 * a report user's credentials (basic auth, or its API key). The official library has no call
 * for it (it covers the Checkout, Management and platform APIs), so it is a plain GET here.
 * Its lines are read strictly: a report that breaks the CSV grammar, lacks a column we read, or
 * holds a line we cannot read is refused whole (ProviderReportUnreadableError), never skipped.
 */

/**
 * The columns read, by Adyen's header names (its default order). A report may have more (Adyen
 * lets an account add columns, and appends Reserved4…Reserved10): they are ignored.
 */
export const settlementColumns = [
  'Company Account',
  'Merchant Account',
  'Psp Reference',
  'Merchant Reference',
  'Payment Method',
  'Creation Date',
  'TimeZone',
  'Type',
  'Modification Reference',
  'Gross Currency',
  'Gross Debit (GC)',
  'Gross Credit (GC)',
  'Exchange Rate',
  'Net Currency',
  'Net Debit (NC)',
  'Net Credit (NC)',
  'Commission (NC)',
  'Markup (NC)',
  'Scheme Fees (NC)',
  'Interchange (NC)',
  'Payment Method Variant',
  'Modification Merchant Reference',
  'Batch Number',
] as const;
export type SettlementColumn = (typeof settlementColumns)[number];
export type SettlementRow = Record<SettlementColumn, string>;

/**
 * What each record type of the report is to reconciliation. A payment line names its payment
 * (Psp Reference, and Merchant Reference: our payment id); `direction` is the side of its gross
 * amount (credit: money in; debit: money out); `source` which reference names the line's own
 * object (the refund's or the dispute's PSP reference is the Modification Reference;
 * `reference` whether our reference is the Merchant Reference (the payment's) or the
 * Modification Merchant Reference (a refund's: our refund id). `ignored`: the batch's own
 * lines (its fees per month, corrections, the payout itself), which name no payment.
 * Any other type is not read: the report is refused, naming it.
 */
export const settlementRecordTypes = {
  Settled: { type: 'charge', direction: 'credit', source: 'Psp Reference', reference: 'Merchant Reference' },
  Refunded: { type: 'refund', direction: 'debit', source: 'Modification Reference', reference: 'Modification Merchant Reference' },
  Chargeback: { type: 'dispute', direction: 'debit', source: 'Modification Reference', reference: 'Merchant Reference' },
  SecondChargeback: { type: 'dispute_second', direction: 'debit', source: 'Modification Reference', reference: 'Merchant Reference' },
  ChargebackReversed: { type: 'dispute_reversal', direction: 'credit', source: 'Modification Reference', reference: 'Merchant Reference' },
  Fee: 'ignored',
  MerchantPayout: 'ignored',
  DepositCorrection: 'ignored',
  Balancetransfer: 'ignored',
  InvoiceDeduction: 'ignored',
} as const satisfies Record<string, 'ignored' | { type: ProviderBalanceTransaction['type']; direction: 'credit' | 'debit'; source: SettlementColumn; reference: SettlementColumn }>;
export type SettlementRecordType = keyof typeof settlementRecordTypes;

/**
 * The time zones a report's TimeZone column names (the account's setting, by its abbreviation),
 * as minutes east of UTC. An abbreviation not here (or an ambiguous one, e.g. IST) refuses the report.
 */
const timeZoneOffsets: Readonly<Record<string, number>> = {
  UTC: 0, GMT: 0, WET: 0, WEST: 60, BST: 60, CET: 60, CEST: 120, EET: 120, EEST: 180, MSK: 180,
  EST: -300, EDT: -240, CST: -360, CDT: -300, MST: -420, MDT: -360, PST: -480, PDT: -420, BRT: -180,
  SGT: 480, HKT: 480, JST: 540, AEST: 600, AEDT: 660,
};

/** The largest report read (Adyen's batches are far smaller): a bigger body is refused, not parsed. */
export const MAX_REPORT_BYTES = 64 * 1024 * 1024;

/** The report's path under the report host, per merchant account and batch. */
export function settlementReportPath(merchantAccount: string, batch: number): string {
  return `/reports/download/MerchantAccount/${encodeURIComponent(merchantAccount)}/settlement_detail_report_batch_${batch}.csv`;
}

/** One CSV line (RFC 4180): a field with a comma, a quote or a line break is quoted, its quotes doubled. */
export function csvLine(fields: readonly string[]): string {
  return fields.map((f) => (/[",\r\n]/.test(f) ? `"${f.replace(/"/g, '""')}"` : f)).join(',');
}

const UNREADABLE = 'the settlement details report cannot be read: ';
const unreadable = (message: string) => new ProviderReportUnreadableError(`${UNREADABLE}${message}`);

/**
 * RFC 4180, strictly: fields separated by commas, records by CRLF or LF; a quoted field may hold
 * commas, line breaks and doubled quotes; a quote anywhere else, an unterminated quote, text after
 * a closing quote or a NUL is refused. One leading byte-order mark and one final line break are
 * allowed; an empty record is refused.
 */
export function parseCsv(text: string): string[][] {
  const records: string[][] = [];
  let record: string[] = [];
  let field = '';
  let i = text.charCodeAt(0) === 0xfeff ? 1 : 0;
  let quoted = false;
  let afterQuote = false;
  let line = 1;
  const endRecord = () => {
    record.push(field);
    if (record.length === 1 && record[0] === '') throw unreadable(`line ${line} is empty`);
    records.push(record);
    record = [];
    field = '';
    afterQuote = false;
  };
  for (; i < text.length; i++) {
    const c = text[i]!;
    if (c === '\0') throw unreadable(`line ${line} holds a NUL character`);
    if (quoted) {
      if (c !== '"') {
        if (c === '\n') line++;
        field += c;
      } else if (text[i + 1] === '"') {
        field += '"';
        i++;
      } else {
        quoted = false;
        afterQuote = true;
      }
      continue;
    }
    if (c === ',') {
      record.push(field);
      field = '';
      afterQuote = false;
    } else if (c === '\n' || (c === '\r' && text[i + 1] === '\n')) {
      if (c === '\r') i++;
      endRecord();
      line++;
    } else if (afterQuote) {
      throw unreadable(`line ${line}: text after a closing quote`);
    } else if (c === '"') {
      if (field !== '') throw unreadable(`line ${line}: a quote inside an unquoted field`);
      quoted = true;
    } else if (c === '\r') {
      throw unreadable(`line ${line}: a carriage return without a line feed`);
    } else {
      field += c;
    }
  }
  if (quoted) throw unreadable(`line ${line}: a quoted field is never closed`);
  // The last record, unless the text ended with its line break.
  if (field !== '' || record.length > 0 || afterQuote) endRecord();
  return records;
}

/** `2013-06-03 11:26:49` in the named zone, as an instant; anything else is refused. */
function creationDate(value: string, zone: string, where: string): Date {
  const m = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})$/.exec(value);
  if (!m) throw unreadable(`${where}: Creation Date "${value}" is not YYYY-MM-DD HH:MM:SS`);
  const offset = Object.hasOwn(timeZoneOffsets, zone) ? timeZoneOffsets[zone]! : undefined;
  if (offset === undefined) throw unreadable(`${where}: TimeZone "${zone}" is not one this reader knows`);
  const [y, mo, d, h, mi, s] = m.slice(1).map(Number) as [number, number, number, number, number, number];
  const local = Date.UTC(y, mo - 1, d, h, mi, s);
  const check = new Date(local);
  if (check.getUTCFullYear() !== y || check.getUTCMonth() !== mo - 1 || check.getUTCDate() !== d || h > 23 || mi > 59 || s > 59) throw unreadable(`${where}: Creation Date "${value}" is not a date`);
  return new Date(local - offset * 60_000);
}

/** A line's amount column: empty (null) or a decimal of the currency's minor units. */
function amountOf(row: SettlementRow, column: SettlementColumn, currency: string, where: string): number | null {
  const value = row[column];
  if (value === '') return null;
  try {
    return minorFromDecimal(value, currency);
  } catch (error) {
    throw unreadable(`${where}: ${column} ${(error as Error).message}`);
  }
}

/** One batch's report as its rows by header name, each with its record number (the header is 1). */
export function parseSettlementRows(text: string): { row: SettlementRow; record: number }[] {
  const [header, ...records] = parseCsv(text);
  if (!header) throw unreadable('the report is empty (no header line)');
  const index = new Map<string, number>();
  header.forEach((name, i) => {
    if (index.has(name)) throw unreadable(`the column "${name}" appears twice`);
    index.set(name, i);
  });
  const missing = settlementColumns.filter((c) => !index.has(c));
  if (missing.length > 0) throw unreadable(`the header lacks ${missing.map((c) => `"${c}"`).join(', ')}`);
  return records.map((fields, i) => {
    if (fields.length !== header.length) throw unreadable(`record ${i + 2} has ${fields.length} fields where the header has ${header.length}`);
    return { row: Object.fromEntries(settlementColumns.map((c) => [c, fields[index.get(c)!]!])) as SettlementRow, record: i + 2 };
  });
}

/** A transaction id of ours for a report line: its batch and record number (a closed batch never changes). */
export const settlementTransactionId = (batch: number, record: number) => `sdr_${batch}_${record}`;

/** The batch and record number of an id made by settlementTransactionId, or null. */
export function parseSettlementTransactionId(id: string): { batch: number; record: number } | null {
  const m = /^sdr_([1-9]\d{0,8})_([1-9]\d{0,8})$/.exec(id);
  return m ? { batch: Number(m[1]), record: Number(m[2]) } : null;
}

/**
 * One batch's report as our balance transactions, in its order: each payment line (Settled,
 * Refunded, the chargebacks) mapped by settlementRecordTypes, in minor units of its currency
 * (gross: the amount, signed by its side; fee: gross less net, Adyen's commission, markup, scheme
 * fees and interchange together); the batch's own lines left out. Refused whole if anything is
 * off: another merchant account or batch, an unknown type, a payment line without its
 * references, a date, zone or amount that does not read, an amount on the wrong side, or a
 * gross and a net in different currencies (a converted settlement, which this reader does not take).
 */
export function settlementTransactions(text: string, expected: { merchantAccount: string; batch: number }): ProviderBalanceTransaction[] {
  const transactions: ProviderBalanceTransaction[] = [];
  let rows: ReturnType<typeof parseSettlementRows>;
  try {
    rows = parseSettlementRows(text);
  } catch (error) {
    // The grammar's and the header's refusals, named by their batch as the lines' are.
    if (error instanceof ProviderReportUnreadableError) throw unreadable(`batch ${expected.batch}, ${error.message.slice(UNREADABLE.length)}`);
    throw error;
  }
  for (const { row, record } of rows) {
    const where = `batch ${expected.batch} record ${record}`;
    if (row['Merchant Account'] !== expected.merchantAccount) throw unreadable(`${where}: Merchant Account "${row['Merchant Account']}" is not ${expected.merchantAccount}`);
    if (row['Batch Number'] !== '' && row['Batch Number'] !== String(expected.batch)) throw unreadable(`${where}: Batch Number "${row['Batch Number']}" is not ${expected.batch}`);
    const kind = Object.hasOwn(settlementRecordTypes, row.Type) ? settlementRecordTypes[row.Type as SettlementRecordType] : undefined;
    if (kind === undefined) throw unreadable(`${where}: Type "${row.Type}" is not a record type this reader knows`);
    if (kind === 'ignored') continue;
    const currency = row['Gross Currency'];
    if (!isCurrency(currency)) throw unreadable(`${where}: Gross Currency "${currency}" is not an ISO 4217 currency`);
    if (row['Net Currency'] !== currency) throw unreadable(`${where}: Net Currency "${row['Net Currency']}" differs from Gross Currency ${currency} (converted settlements are not read)`);
    const grossDebit = amountOf(row, 'Gross Debit (GC)', currency, where);
    const grossCredit = amountOf(row, 'Gross Credit (GC)', currency, where);
    const netDebit = amountOf(row, 'Net Debit (NC)', currency, where);
    const netCredit = amountOf(row, 'Net Credit (NC)', currency, where);
    const gross = kind.direction === 'credit' ? grossCredit : grossDebit;
    if (gross === null || (kind.direction === 'credit' ? grossDebit : grossCredit) !== null) throw unreadable(`${where}: a ${row.Type} line has its gross amount in Gross ${kind.direction === 'credit' ? 'Credit' : 'Debit'} alone`);
    if ((netDebit === null) === (netCredit === null)) throw unreadable(`${where}: a line has its net amount in one of Net Debit and Net Credit`);
    for (const column of ['Psp Reference', kind.source] as const) {
      if (!/^[0-9A-Za-z]{16}$/.test(row[column])) throw unreadable(`${where}: ${column} "${row[column]}" is not a PSP reference`);
    }
    const amountMinor = kind.direction === 'credit' ? gross : -gross;
    const netMinor = (netCredit ?? 0) - (netDebit ?? 0);
    transactions.push({
      id: settlementTransactionId(expected.batch, record),
      type: kind.type,
      source: row[kind.source],
      chargeId: row['Psp Reference'],
      reference: row[kind.reference] === '' ? null : row[kind.reference],
      amountMinor,
      feeMinor: amountMinor - netMinor,
      currency,
      status: 'available',
      createdAt: creationDate(row['Creation Date'], row.TimeZone, where),
    });
  }
  return transactions;
}

export interface SettlementReportConfig {
  /** The report host (Adyen's test one: https://ca-test.adyen.com), or a double. */
  url: string;
  merchantAccount: string;
  /** The report user's basic-auth credentials, else its API key (X-API-Key). */
  username: string | null;
  password: string | null;
  apiKey: string | null;
  /** Per download; past it the read is retried. */
  timeoutMs: number;
}

/**
 * The reports of one merchant account, read batch by batch until one is not there yet (404: its
 * batch has not closed), from the first batch that may hold the query's lines: batches close in
 * time order, so it is found by halving (firstBatchFrom), not by reading every batch from 1. A
 * closed batch never changes, so the span of its lines' creation dates is kept (per process) and
 * a batch wholly before a query is not downloaded again.
 */
export class SettlementReports {
  private readonly spans = new Map<number, { first: number; last: number } | null>();

  constructor(private readonly config: SettlementReportConfig) {}

  /**
   * One page of the lines created in [from, to): the next lines after `startingAfter` (an id of
   * ours, `sdr_<batch>_<record>`), at most `limit`, from one batch at a time. `hasMore` is false
   * once the next batch is not there, or a batch's lines all come after `to` (batches close in
   * time order).
   */
  async list(query: { from: Date; to: Date; startingAfter?: string; limit?: number }, options?: CallOptions): Promise<{ data: ProviderBalanceTransaction[]; hasMore: boolean }> {
    const limit = query.limit ?? 100;
    const from = query.from.getTime();
    const to = query.to.getTime();
    let position: { batch: number; record: number };
    if (query.startingAfter !== undefined) {
      const cursor = parseSettlementTransactionId(query.startingAfter);
      if (!cursor) throw new ProviderRejectedError(`adyen: "${query.startingAfter}" is not a settlement line of ours`, 400, 'invalid_cursor');
      position = cursor;
    } else {
      position = { batch: await this.firstBatchFrom(from, options), record: 0 };
    }
    for (;;) {
      const span = this.spans.get(position.batch);
      const before = span === null || (span !== undefined && span.last < from);
      if (!(before && position.record === 0)) {
        const lines = await this.batch(position.batch, options);
        if (lines === null) return { data: [], hasMore: false };
        const after = position.record;
        const inWindow = lines.filter((t) => parseSettlementTransactionId(t.id)!.record > after && t.createdAt.getTime() >= from && t.createdAt.getTime() < to);
        const past = lines.length > 0 && lines.every((t) => t.createdAt.getTime() >= to);
        if (inWindow.length > limit) return { data: inWindow.slice(0, limit), hasMore: true };
        if (inWindow.length > 0) return { data: inWindow, hasMore: !past };
        if (past) return { data: [], hasMore: false };
      }
      position = { batch: position.batch + 1, record: 0 };
    }
  }

  /**
   * The first batch that may hold a line created at or after `from`. Batches close in time order
   * (a batch's lines come no earlier than the lines of the batches before it), so batches 1, 2,
   * 4, 8, … are read until one reaches `from` or is not there yet, then the span between them
   * is halved: about 2·log2(n) downloads for n batches, not n, the first time a process asks
   * (a worker's first reconciliation run of an account with years of batches).
   */
  private async firstBatchFrom(from: number, options?: CallOptions): Promise<number> {
    // Every batch up to `below` ends before `from`; `above` (0: none found yet) reaches it or is not there yet.
    let below = 0;
    let above = 0;
    for (let step = 1; above === 0; step *= 2) {
      const probe = below + step;
      if (await this.endsBefore(probe, from, options)) below = probe;
      else above = probe;
    }
    while (above - below > 1) {
      const middle = Math.floor((below + above) / 2);
      if (await this.endsBefore(middle, from, options)) below = middle;
      else above = middle;
    }
    return above;
  }

  /** Whether batch `n` (and so every batch before it) ends before `from`: false when it is not there yet; an empty batch is placed by the next one with lines. */
  private async endsBefore(n: number, from: number, options?: CallOptions): Promise<boolean> {
    for (let batch = n; ; batch++) {
      if (!this.spans.has(batch) && (await this.batch(batch, options)) === null) return false;
      const span = this.spans.get(batch);
      if (span) return span.last < from;
    }
  }

  /** One batch's lines; null: no such batch yet. */
  async batch(batch: number, options?: CallOptions): Promise<ProviderBalanceTransaction[] | null> {
    const text = await this.download(batch, options);
    if (text === null) return null;
    const lines = settlementTransactions(text, { merchantAccount: this.config.merchantAccount, batch });
    const span = lines.reduce<{ first: number; last: number } | null>((s, t) => {
      const at = t.createdAt.getTime();
      return s === null ? { first: at, last: at } : { first: Math.min(s.first, at), last: Math.max(s.last, at) };
    }, null);
    this.spans.set(batch, span);
    return lines;
  }

  private async download(batch: number, options?: CallOptions): Promise<string | null> {
    const { url: base, username, password, apiKey, timeoutMs } = this.config;
    const path = settlementReportPath(this.config.merchantAccount, batch);
    const auth: Record<string, string> | null =
      username !== null && password !== null ? { Authorization: `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}` } : apiKey !== null ? { 'X-API-Key': apiKey } : null;
    if (!auth) throw new ProviderRejectedError('adyen: no report credentials are configured (reportUsername and reportPassword, or reportApiKey)', 401, 'report_credentials_missing');
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = options?.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    let response: Response;
    let body: ArrayBuffer;
    try {
      response = await fetch(`${base.replace(/\/$/, '')}${path}`, { headers: { ...auth, Accept: 'text/csv' }, signal });
      if (Number(response.headers.get('content-length') ?? 0) > MAX_REPORT_BYTES) throw unreadable(`batch ${batch} is larger than ${MAX_REPORT_BYTES} bytes`);
      body = await response.arrayBuffer();
    } catch (error) {
      if (error instanceof ProviderReportUnreadableError) throw error;
      const reason = timeout.aborted ? `no answer within ${timeoutMs} ms` : signal.aborted ? 'aborted by the caller' : 'network error';
      throw new ProviderUnavailableError(`adyen GET ${path}: ${reason}`, undefined, { cause: error });
    }
    if (response.status === 404) return null;
    if (response.status === 429 || response.status >= 500) throw new ProviderUnavailableError(`adyen GET ${path}: ${response.status}`, response.status);
    if (!response.ok) throw new ProviderRejectedError(`adyen GET ${path}: ${response.status} (the report user's credentials or role)`, response.status, response.status === 401 ? 'unauthorized' : 'report_refused');
    if (body.byteLength > MAX_REPORT_BYTES) throw unreadable(`batch ${batch} is larger than ${MAX_REPORT_BYTES} bytes`);
    try {
      return new TextDecoder('utf-8', { fatal: true }).decode(body);
    } catch {
      throw unreadable(`batch ${batch} is not UTF-8`);
    }
  }
}
