import type { IncomingMessage, ServerResponse } from 'node:http';
import { timingSafeEqual } from 'node:crypto';
import { decimalAmount, isCurrency } from '../../domain/money';
import { csvLine, settlementColumns, settlementReportPath, type SettlementColumn } from '../../provider/adyen/settlement';

/**
 * The double's Settlement details reports (Adyen's reconciliation: provider/adyen/settlement.ts
 * reads them). Every money movement the double makes is recorded as a line of the open batch
 * (recordSettlementLine); a batch closes when its report is first asked for (a GET of the open
 * batch's number, when it has lines) or by `POST /_sandbox/settlement/close`, and is then
 * served, for good, as Adyen serves it: a CSV in Adyen's columns at
 * `/reports/download/MerchantAccount/<account>/settlement_detail_report_batch_<n>.csv` on the
 * double's own URL, to the report user's basic auth or its API key only (401 otherwise), 404
 * for a batch not closed. A closed batch ends with its MerchantPayout line (the net paid out),
 * dated in the account's time zone (Europe/Amsterdam: CET or CEST), as Adyen's are.
 */

/**
 * The record types the double writes, with the side of their gross amount and the fee Adyen
 * keeps from it by default (the caller may name its own). Adding one (e.g. another module's
 * Chargeback, ChargebackReversed, SecondChargeback) is one entry here: Adyen's name, its side,
 * its default fee; then recordSettlementLine({ type: 'Chargeback', … }) where its money moves.
 */
export const settlementLineTypes = {
  /** A captured payment: money in, less Adyen's commission (10 minor units and 1.2 %). */
  Settled: { side: 'credit', fee: (grossMinor: number) => 10 + Math.round((grossMinor * 12) / 1000) },
  /** A confirmed refund: money out, no fee. */
  Refunded: { side: 'debit', fee: () => 0 },
  /** A dispute's money taken back by the card network (CHARGEBACK; ./disputes.ts): money out, its fee booked apart. */
  Chargeback: { side: 'debit', fee: () => 0 },
  /** A chargeback reversed (the defence won: CHARGEBACK_REVERSED): money back in. */
  ChargebackReversed: { side: 'credit', fee: () => 0 },
  /** A reversed chargeback taken again (SECOND_CHARGEBACK): money out. */
  SecondChargeback: { side: 'debit', fee: () => 0 },
} satisfies Record<string, { side: 'credit' | 'debit'; fee: (grossMinor: number) => number }>;
export type SettlementLineType = keyof typeof settlementLineTypes;

/** One money movement, in minor units (gross: positive; its side is its type's). */
export interface SettlementLine {
  type: SettlementLineType;
  /** The payment's PSP reference. */
  pspReference: string;
  /** The payment's merchant reference (our payment id). */
  merchantReference: string;
  /** The modification's PSP reference (the capture's, the refund's, the chargeback's). */
  modificationReference: string;
  /** The modification's merchant reference (a refund's: our refund id); empty when none. */
  modificationMerchantReference?: string;
  currency: string;
  grossMinor: number;
  /** Adyen's fee on the line; default: its type's. */
  feeMinor?: number;
  /** When it was made; default now. */
  at?: Date;
}

/** `at` in the account's time zone (Europe/Amsterdam), as Adyen writes a Creation Date, and its abbreviation. */
function accountTime(at: Date): { date: string; zone: string } {
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Amsterdam', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' })
      .formatToParts(at)
      .map((p) => [p.type, p.value]),
  ) as Record<'year' | 'month' | 'day' | 'hour' | 'minute' | 'second', string>;
  const local = Date.UTC(Number(parts.year), Number(parts.month) - 1, Number(parts.day), Number(parts.hour), Number(parts.minute), Number(parts.second));
  const offsetMinutes = Math.round((local - Math.floor(at.getTime() / 1000) * 1000) / 60_000);
  return { date: `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}:${parts.second}`, zone: offsetMinutes === 120 ? 'CEST' : 'CET' };
}

export interface SettlementReportUser {
  /** Basic auth of the report user (e.g. `report@Company.OrchestratorTest`). */
  username: string;
  password: string;
  /** Its API key (X-API-Key), the other way Adyen's report host takes; null: basic auth only. */
  apiKey: string | null;
}

const same = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

/** The double's settlement batches of one merchant account. */
export class SettlementBatches {
  private readonly closed: string[][] = [];
  /** The open batch's lines, as CSV lines (a raw fault line as given), and its net so far. */
  private open: string[] = [];
  private openNetMinor = new Map<string, number>();

  constructor(private readonly account: { companyAccount: string; merchantAccount: string; user: SettlementReportUser }) {}

  /** The number the open batch will have. */
  get openBatch(): number {
    return this.closed.length + 1;
  }

  /** Records one money movement in the open batch (what every module of the double calls where money moves). */
  record(line: SettlementLine): void {
    const kind = settlementLineTypes[line.type];
    const fee = line.feeMinor ?? kind.fee(line.grossMinor);
    const amount = (minor: number) => decimalAmount(minor, line.currency);
    const net = line.grossMinor - fee;
    const { date, zone } = accountTime(line.at ?? new Date());
    const fields: Partial<Record<SettlementColumn, string>> = {
      'Company Account': this.account.companyAccount,
      'Merchant Account': this.account.merchantAccount,
      'Psp Reference': line.pspReference,
      'Merchant Reference': line.merchantReference,
      'Payment Method': 'visa',
      'Creation Date': date,
      TimeZone: zone,
      Type: line.type,
      'Modification Reference': line.modificationReference,
      'Gross Currency': line.currency,
      [kind.side === 'credit' ? 'Gross Credit (GC)' : 'Gross Debit (GC)']: amount(line.grossMinor),
      'Exchange Rate': '1',
      'Net Currency': line.currency,
      [kind.side === 'credit' ? 'Net Credit (NC)' : 'Net Debit (NC)']: amount(kind.side === 'credit' ? net : line.grossMinor + fee),
      ...(fee > 0 ? { 'Commission (NC)': amount(fee) } : {}),
      'Payment Method Variant': 'visa',
      'Modification Merchant Reference': line.modificationMerchantReference ?? '',
      'Batch Number': String(this.openBatch),
    };
    this.open.push(this.csv(fields));
    this.openNetMinor.set(line.currency, (this.openNetMinor.get(line.currency) ?? 0) + (kind.side === 'credit' ? net : -(line.grossMinor + fee)));
  }

  /** A fault for tests: a line written into the open batch as given (a malformed report). */
  recordRaw(text: string): void {
    this.open.push(text);
  }

  /** Closes the open batch (with its MerchantPayout lines, one per currency); null if it has no lines. */
  close(at = new Date()): number | null {
    if (this.open.length === 0) return null;
    const batch = this.openBatch;
    const { date, zone } = accountTime(at);
    for (const [currency, net] of this.openNetMinor) {
      if (net === 0) continue;
      this.open.push(
        this.csv({
          'Company Account': this.account.companyAccount,
          'Merchant Account': this.account.merchantAccount,
          'Creation Date': date,
          TimeZone: zone,
          Type: 'MerchantPayout',
          'Gross Currency': currency,
          'Net Currency': currency,
          [net > 0 ? 'Net Debit (NC)' : 'Net Credit (NC)']: decimalAmount(Math.abs(net), currency),
          'Batch Number': String(batch),
        }),
      );
    }
    this.closed.push(this.open);
    this.open = [];
    this.openNetMinor = new Map();
    return batch;
  }

  /** The closed batch's report, or null (not closed; the open one is closed by this ask if it has lines). */
  report(batch: number): string | null {
    if (batch === this.openBatch) this.close();
    const lines = this.closed[batch - 1];
    return lines ? [csvLine(settlementColumns), ...lines].join('\r\n') + '\r\n' : null;
  }

  /**
   * Serves a report request on the double's URL; false when the path is not a report's (the
   * caller goes on). Authenticated like Adyen's report host: 401 for missing or wrong credentials.
   */
  serve(req: IncomingMessage, res: ServerResponse, path: string): boolean {
    const prefix = settlementReportPath(this.account.merchantAccount, 0).replace(/0\.csv$/, '');
    if (!path.startsWith('/reports/download/')) return false;
    const text = (status: number, body: string, type = 'text/plain') => {
      res.writeHead(status, { 'Content-Type': type, ...(status === 401 ? { 'WWW-Authenticate': 'Basic realm="Adyen reports"' } : {}) });
      res.end(body);
    };
    if (!this.authorized(req.headers)) return (text(401, 'Unauthorized'), true);
    if (req.method !== 'GET') return (text(405, 'Method not allowed'), true);
    const batch = path.startsWith(prefix) ? /^([1-9]\d{0,8})\.csv$/.exec(path.slice(prefix.length))?.[1] : undefined;
    const report = batch === undefined ? null : this.report(Number(batch));
    if (report === null) return (text(404, 'Not found'), true);
    text(200, report, 'text/csv; charset=utf-8');
    return true;
  }

  /** The `/_sandbox/settlement/…` controls: a line made at the PSP (as its dashboard would), a raw line, a close. */
  control(method: string, path: string, raw: string): { status: number; body: unknown } | null {
    if (method !== 'POST') return null;
    if (path === '/_sandbox/settlement/close') return { status: 200, body: { batch: this.close() } };
    if (path !== '/_sandbox/settlement/lines') return null;
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(raw || '{}') as Record<string, unknown>;
    } catch {
      return { status: 400, body: { message: 'the body is not JSON' } };
    }
    if (typeof body.raw === 'string') {
      this.recordRaw(body.raw);
      return { status: 201, body: { batch: this.openBatch } };
    }
    const text = (key: string) => (typeof body[key] === 'string' ? (body[key] as string) : undefined);
    const type = text('type');
    const currency = text('currency');
    const gross = body.gross_minor;
    if (!type || !Object.hasOwn(settlementLineTypes, type) || !currency || !isCurrency(currency) || !Number.isSafeInteger(gross) || (gross as number) <= 0 || !text('psp_reference') || !text('merchant_reference')) {
      return { status: 400, body: { message: `type (${Object.keys(settlementLineTypes).join(', ')}), psp_reference, merchant_reference, currency and a positive gross_minor are required` } };
    }
    const fee = body.fee_minor;
    if (fee !== undefined && (!Number.isSafeInteger(fee) || (fee as number) < 0)) return { status: 400, body: { message: 'fee_minor must be a non-negative integer' } };
    this.record({
      type: type as SettlementLineType,
      pspReference: text('psp_reference')!,
      merchantReference: text('merchant_reference')!,
      modificationReference: text('modification_reference') ?? text('psp_reference')!,
      modificationMerchantReference: text('modification_merchant_reference') ?? '',
      currency,
      grossMinor: gross as number,
      ...(fee !== undefined ? { feeMinor: fee as number } : {}),
    });
    return { status: 201, body: { batch: this.openBatch } };
  }

  private authorized(headers: IncomingMessage['headers']): boolean {
    const { user } = this.account;
    const key = headers['x-api-key'];
    if (typeof key === 'string' && user.apiKey !== null) return same(key, user.apiKey);
    const basic = /^Basic ([A-Za-z0-9+/=]+)$/.exec(headers.authorization ?? '');
    return basic !== null && same(Buffer.from(basic[1]!, 'base64').toString('utf8'), `${user.username}:${user.password}`);
  }

  private csv(fields: Partial<Record<SettlementColumn, string>>): string {
    return csvLine(settlementColumns.map((c) => fields[c] ?? ''));
  }
}
