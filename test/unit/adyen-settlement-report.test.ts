import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAdyenDouble, type AdyenDouble } from '../../doubles/adyen/server';
import { minorFromDecimal } from '../../domain/money';
import { csvLine, parseCsv, settlementColumns, settlementTransactions, SettlementReports } from '../../provider/adyen/settlement';
import { ProviderRejectedError, ProviderReportUnreadableError, ProviderUnavailableError } from '../../provider/types';

/**
 * Adyen's Settlement details report (provider/adyen/settlement.ts): the strict CSV grammar, each
 * record type mapped to our balance transactions in minor units, hostile and malformed reports
 * refused whole; and the reader's paging over the double's batches (doubles/adyen/settlement.ts).
 */
const merchantAccount = 'OrchestratorTest';
const header = csvLine(settlementColumns);
type Fields = Partial<Record<(typeof settlementColumns)[number], string>>;
const line = (fields: Fields) => csvLine(settlementColumns.map((c) => fields[c] ?? ''));
const base: Fields = { 'Company Account': 'Co', 'Merchant Account': merchantAccount, 'Payment Method': 'visa', 'Creation Date': '2026-01-15 10:23:45', TimeZone: 'CET', 'Exchange Rate': '1', 'Gross Currency': 'EUR', 'Net Currency': 'EUR' };
const settled: Fields = { ...base, Type: 'Settled', 'Psp Reference': 'AAAABBBBCCCCDDDD', 'Merchant Reference': 'pay_1', 'Modification Reference': 'AAAABBBBCCCCDDDD', 'Gross Credit (GC)': '25.00', 'Net Credit (NC)': '24.60', 'Commission (NC)': '0.40' };
const refunded: Fields = { ...base, Type: 'Refunded', 'Psp Reference': 'AAAABBBBCCCCDDDD', 'Merchant Reference': 'pay_1', 'Modification Reference': 'EEEEFFFFGGGGHHHH', 'Modification Merchant Reference': 're_1', 'Gross Debit (GC)': '5', 'Net Debit (NC)': '5.00' };
const report = (...lines: string[]) => [header, ...lines].join('\r\n') + '\r\n';
const read = (text: string, batch = 3) => settlementTransactions(text, { merchantAccount, batch });
const refusal = (text: string) => {
  try {
    read(text);
  } catch (error) {
    expect(error).toBeInstanceOf(ProviderReportUnreadableError);
    return (error as Error).message;
  }
  throw new Error('the report was read');
};

describe('the CSV grammar (RFC 4180, strictly)', () => {
  it('quoted fields keep commas, line breaks and doubled quotes; CRLF and LF both end a record; one BOM is skipped', () => {
    expect(parseCsv('\ufeffa,"b,1","c\r\nd","e""f"\nx,,\r\n')).toEqual([
      ['a', 'b,1', 'c\r\nd', 'e"f'],
      ['x', '', ''],
    ]);
    expect(parseCsv('a,b')).toEqual([['a', 'b']]);
    expect(parseCsv(csvLine(['1,2', 'say "hi"', 'plain']))).toEqual([['1,2', 'say "hi"', 'plain']]);
  });

  it.each([
    ['a quote inside an unquoted field', 'a,b"c\r\n', /a quote inside an unquoted field/],
    ['an unterminated quote', 'a,"b\r\n', /never closed/],
    ['text after a closing quote', 'a,"b"c\r\n', /text after a closing quote/],
    ['a NUL', 'a,b\0\r\n', /NUL/],
    ['a lone carriage return', 'a\rb\r\n', /carriage return/],
    ['an empty line inside', 'a,b\r\n\r\nc,d\r\n', /line 2 is empty/],
  ])('%s is refused', (_, text, message) => {
    expect(() => parseCsv(text)).toThrow(ProviderReportUnreadableError);
    expect(() => parseCsv(text)).toThrow(message);
  });
});

describe('amounts in major units as minor units', () => {
  it('by the currency’s own digits, never through a float', () => {
    expect(minorFromDecimal('25.00', 'EUR')).toBe(2500);
    expect(minorFromDecimal('7.5', 'EUR')).toBe(750);
    expect(minorFromDecimal('0.29', 'EUR')).toBe(29);
    expect(minorFromDecimal('1200', 'JPY')).toBe(1200);
    expect(minorFromDecimal('1.234', 'KWD')).toBe(1234);
    for (const [text, currency] of [['1.5', 'JPY'], ['1.001', 'EUR'], ['-1.00', 'EUR'], ['1e3', 'EUR'], ['1,000.00', 'EUR'], [' 1.00', 'EUR'], ['.5', 'EUR'], ['1.', 'EUR'], ['1.00', 'XXX1'], ['1234567890123456', 'EUR']] as const) {
      expect(() => minorFromDecimal(text, currency), `${text} ${currency}`).toThrow(RangeError);
    }
  });
});

describe('a report as balance transactions', () => {
  it('Settled and Refunded lines: amounts signed by their side, fees as gross less net, references as ours, times from the account’s zone; the batch’s own lines left out', () => {
    const payout = line({ ...base, Type: 'MerchantPayout', 'Net Debit (NC)': '19.60', 'Batch Number': '3' });
    const fee = line({ ...base, Type: 'Fee', 'Modification Reference': 'Transaction Fees', 'Net Debit (NC)': '0.10' });
    const summer = line({ ...settled, 'Creation Date': '2026-07-01 12:00:00', TimeZone: 'CEST', 'Batch Number': '3' });
    expect(read(report(line(settled), line(refunded), summer, fee, payout))).toEqual([
      { id: 'sdr_3_2', type: 'charge', source: 'AAAABBBBCCCCDDDD', chargeId: 'AAAABBBBCCCCDDDD', reference: 'pay_1', amountMinor: 2500, feeMinor: 40, currency: 'EUR', status: 'available', createdAt: new Date('2026-01-15T09:23:45Z') },
      { id: 'sdr_3_3', type: 'refund', source: 'EEEEFFFFGGGGHHHH', chargeId: 'AAAABBBBCCCCDDDD', reference: 're_1', amountMinor: -500, feeMinor: 0, currency: 'EUR', status: 'available', createdAt: new Date('2026-01-15T09:23:45Z') },
      expect.objectContaining({ id: 'sdr_3_4', createdAt: new Date('2026-07-01T10:00:00Z') }),
    ]);
  });

  it('chargeback lines are dispute money, named by the chargeback’s own reference', () => {
    const chargeback = line({ ...base, Type: 'Chargeback', 'Psp Reference': 'AAAABBBBCCCCDDDD', 'Merchant Reference': 'pay_1', 'Modification Reference': 'CBCBCBCBCBCBCBCB', 'Gross Debit (GC)': '349.99', 'Net Debit (NC)': '357.49', 'Commission (NC)': '7.5' });
    const reversed = line({ ...base, Type: 'ChargebackReversed', 'Psp Reference': 'AAAABBBBCCCCDDDD', 'Merchant Reference': 'pay_1', 'Modification Reference': 'CBCBCBCBCBCBCBCB', 'Gross Credit (GC)': '349.99', 'Net Credit (NC)': '349.99' });
    expect(read(report(chargeback, reversed)).map((t) => [t.type, t.source, t.amountMinor, t.feeMinor])).toEqual([
      ['dispute', 'CBCBCBCBCBCBCBCB', -34999, 750],
      ['dispute_reversal', 'CBCBCBCBCBCBCBCB', 34999, 0],
    ]);
  });

  it('extra columns, in any order, are ignored; a header-only report is no lines', () => {
    const columns = ['Reserved4', ...[...settlementColumns].reverse()];
    const text = [csvLine(columns), csvLine(columns.map((c) => (c === 'Reserved4' ? 'x' : ((settled as Record<string, string>)[c] ?? ''))))].join('\n');
    expect(read(text)).toEqual([expect.objectContaining({ amountMinor: 2500, feeMinor: 40 })]);
    expect(read(report())).toEqual([]);
  });

  it.each([
    ['an empty body', '', /batch 3, the report is empty/],
    ['a missing column', [csvLine(settlementColumns.filter((c) => c !== 'Net Credit (NC)')), line(settled)].join('\n'), /lacks "Net Credit \(NC\)"/],
    ['a column twice', csvLine([...settlementColumns, 'Type']) + '\n', /"Type" appears twice/],
    ['a short record', report(line(settled).split(',').slice(0, 10).join(',')), /record 2 has 10 fields/],
    ['a long record', report(line(settled) + ',extra'), /record 2 has 24 fields/],
    ['another merchant account', report(line({ ...settled, 'Merchant Account': 'Other' })), /Merchant Account "Other"/],
    ['another batch', report(line({ ...settled, 'Batch Number': '4' })), /Batch Number "4" is not 3/],
    ['an unknown record type', report(line({ ...settled, Type: 'SentForSettle' })), /Type "SentForSettle"/],
    ['an injected type', report(line({ ...settled, Type: '__proto__' })), /Type "__proto__"/],
    ['a float amount', report(line({ ...settled, 'Gross Credit (GC)': '2.5e1' })), /Gross Credit \(GC\).*not a decimal/],
    ['a negative amount', report(line({ ...settled, 'Net Credit (NC)': '-24.60' })), /Net Credit/],
    ['too many decimals', report(line({ ...settled, 'Gross Credit (GC)': '25.001' })), /more decimals/],
    ['a credit line on the debit side', report(line({ ...settled, 'Gross Credit (GC)': '', 'Gross Debit (GC)': '25.00' })), /Gross Credit alone/],
    ['both sides', report(line({ ...refunded, 'Gross Credit (GC)': '5.00' })), /Gross Debit alone/],
    ['no net', report(line({ ...settled, 'Net Credit (NC)': '' })), /net amount/],
    ['a converted settlement', report(line({ ...settled, 'Net Currency': 'USD' })), /converted/],
    ['an unknown currency', report(line({ ...settled, 'Gross Currency': 'EURO', 'Net Currency': 'EURO' })), /not an ISO 4217/],
    ['a PSP reference that is not one', report(line({ ...settled, 'Psp Reference': "1' OR '1'='1" })), /not a PSP reference/],
    ['a refund without its reference', report(line({ ...refunded, 'Modification Reference': '' })), /Modification Reference "" is not/],
    ['an impossible date', report(line({ ...settled, 'Creation Date': '2026-02-30 10:00:00' })), /not a date/],
    ['an ISO date', report(line({ ...settled, 'Creation Date': '2026-01-15T10:23:45Z' })), /not YYYY-MM-DD HH:MM:SS/],
    ['an unknown time zone', report(line({ ...settled, TimeZone: 'IST' })), /TimeZone "IST"/],
  ])('%s refuses the whole report', (_, text, message) => {
    expect(refusal(text)).toMatch(message);
  });

  it('a report of twenty thousand lines is read whole, in order', () => {
    const many = Array.from({ length: 20_000 }, (_, i) => line({ ...settled, 'Merchant Reference': `pay_${i}` }));
    const lines = read(report(...many));
    expect(lines).toHaveLength(20_000);
    expect(lines[19_999]).toMatchObject({ id: 'sdr_3_20001', reference: 'pay_19999' });
  });
});

describe('the reader against the double’s report host', () => {
  let double: AdyenDouble;
  const user = { username: 'report@Company.Test', password: 'report-secret', apiKey: 'report-api-key' };
  const reports = (credentials: Partial<{ username: string | null; password: string | null; apiKey: string | null }> = {}) =>
    new SettlementReports({ url: double.url, merchantAccount, username: user.username, password: user.password, apiKey: null, timeoutMs: 2000, ...credentials });
  const from = new Date(Date.now() - 60_000);
  const to = new Date(Date.now() + 3_600_000);
  /** A report host that answers every download with `status`. */
  let server: Server;
  let serverUrl: string;
  let status = 500;

  beforeAll(async () => {
    double = await startAdyenDouble({ apiKey: 'k', merchantAccount, hmacKey: '44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056', webhookUrl: null, reportUser: user });
    server = createServer((_req, res) => res.writeHead(status).end());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    serverUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await double.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const record = (merchantReference: string, grossMinor: number) =>
    double.settlement.record({ type: 'Settled', pspReference: `${merchantReference.padEnd(16, '0').slice(0, 16)}`.toUpperCase().replace(/[^0-9A-Z]/g, '0'), merchantReference, modificationReference: 'MODMODMODMODMOD1', currency: 'EUR', grossMinor });

  it('pages by batch and by limit, with the cursor the reconciliation passes; a batch not closed yet ends the report; closed batches are not changed by new lines', async () => {
    for (let i = 0; i < 5; i++) record(`pay_a${i}`, 1000 + i);
    expect(double.settlement.close()).toBe(1);
    for (let i = 0; i < 2; i++) record(`pay_b${i}`, 2000 + i);
    const reader = reports();
    const pages: { ids: string[]; hasMore: boolean }[] = [];
    let startingAfter: string | undefined;
    for (;;) {
      const page = await reader.list({ from, to, limit: 3, ...(startingAfter ? { startingAfter } : {}) });
      pages.push({ ids: page.data.map((t) => t.id), hasMore: page.hasMore });
      if (!page.hasMore || page.data.length === 0) break;
      startingAfter = page.data.at(-1)!.id;
    }
    // Batch 2 was open: asking for it closed it (its MerchantPayout line is not a transaction).
    expect(pages).toEqual([
      { ids: ['sdr_1_2', 'sdr_1_3', 'sdr_1_4'], hasMore: true },
      { ids: ['sdr_1_5', 'sdr_1_6'], hasMore: true },
      { ids: ['sdr_2_2', 'sdr_2_3'], hasMore: true },
      { ids: [], hasMore: false },
    ]);
    expect((await reader.batch(2))!.map((t) => t.amountMinor)).toEqual([2000, 2001]);
    record('pay_c0', 3000);
    expect((await reader.batch(2))!.map((t) => t.amountMinor)).toEqual([2000, 2001]);
    expect(await reports().list({ from: to, to: new Date(to.getTime() + 1000) })).toEqual({ data: [], hasMore: false });
  });

  it('the report user’s API key is taken too; wrong or missing credentials are refused (401), never retried as unknown', async () => {
    expect(await reports({ username: null, password: null, apiKey: user.apiKey }).batch(1)).toHaveLength(5);
    for (const wrong of [{ password: 'nope' }, { username: null, apiKey: 'nope' }]) {
      const error = await reports(wrong).batch(1).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ProviderRejectedError);
      expect(error).toMatchObject({ status: 401 });
    }
    await expect(reports({ username: null, password: null, apiKey: null }).batch(1)).rejects.toThrow(/no report credentials/);
  });

  it('a malformed line makes its batch unreadable, and the reader says which', async () => {
    record('pay_d0', 4000);
    const control = await fetch(`${double.url}/_sandbox/settlement/lines`, { method: 'POST', body: JSON.stringify({ raw: 'Co,OrchestratorTest,"broken' }) });
    expect(control.status).toBe(201);
    const closed = (await (await fetch(`${double.url}/_sandbox/settlement/close`, { method: 'POST' })).json()) as { batch: number };
    await expect(reports().batch(closed.batch)).rejects.toThrow(ProviderReportUnreadableError);
    // Read page by page as the reconciliation does: the good batches first, then the broken one.
    const reader = reports();
    let startingAfter: string | undefined;
    const pages = async () => {
      for (;;) {
        const page = await reader.list({ from, to, ...(startingAfter ? { startingAfter } : {}) });
        if (!page.hasMore || page.data.length === 0) return;
        startingAfter = page.data.at(-1)!.id;
      }
    };
    await expect(pages()).rejects.toThrow(/cannot be read: batch 4, line \d+: a quoted field is never closed/);
    expect(startingAfter).toMatch(/^sdr_3_/);
  });

  it('a 5xx or 429 is an unknown outcome (retried); another refusal is final', async () => {
    const at = (answer: number) => ((status = answer), new SettlementReports({ url: serverUrl, merchantAccount, username: 'u', password: 'p', apiKey: null, timeoutMs: 2000 }));
    await expect(at(503).batch(1)).rejects.toBeInstanceOf(ProviderUnavailableError);
    await expect(at(429).batch(1)).rejects.toBeInstanceOf(ProviderUnavailableError);
    await expect(at(403).batch(1)).rejects.toBeInstanceOf(ProviderRejectedError);
  });
});

describe('the first batch of a window, found without reading every batch before it', () => {
  /** Batch n's reports, by number; every download counted. A number it does not hold is not closed yet (404). */
  const batches = new Map<number, string>();
  const downloads: number[] = [];
  let host: Server;
  let hostUrl: string;
  /** An hour's line: Creation Date `hour` hours after 2026-01-01 00:00 CET (one a batch). */
  const hourly = (hour: number) =>
    line({
      ...settled,
      'Creation Date': `2026-01-${String(1 + Math.floor(hour / 24)).padStart(2, '0')} ${String(hour % 24).padStart(2, '0')}:00:00`,
      'Psp Reference': `P${String(hour).padStart(15, '0')}`,
      'Merchant Reference': `pay_${hour}`,
    });
  const at = (hour: number) => new Date(Date.UTC(2026, 0, 1, hour - 1)); // CET is UTC+1 in January
  /** Batches 1..count, batch n with the line of hour n, but those in `empty` with none. */
  const closeBatches = (count: number, empty: number[] = []) => {
    batches.clear();
    for (let n = 1; n <= count; n++) batches.set(n, empty.includes(n) ? report() : report(hourly(n)));
  };
  const reader = () => new SettlementReports({ url: hostUrl, merchantAccount, username: 'u', password: 'p', apiKey: null, timeoutMs: 2000 });
  /** Every page of [from, to), as the reconciliation reads them. */
  async function window(from: Date, to: Date, reports = reader()): Promise<string[]> {
    const ids: string[] = [];
    let startingAfter: string | undefined;
    for (;;) {
      const page = await reports.list({ from, to, limit: 100, ...(startingAfter ? { startingAfter } : {}) });
      ids.push(...page.data.map((t) => t.id));
      if (!page.hasMore || page.data.length === 0) return ids;
      startingAfter = page.data.at(-1)!.id;
    }
  }

  beforeAll(async () => {
    host = createServer((req, res) => {
      const n = Number(/settlement_detail_report_batch_(\d+)\.csv$/.exec(req.url ?? '')?.[1]);
      downloads.push(n);
      const text = batches.get(n);
      res.writeHead(text === undefined ? 404 : 200, { 'content-type': 'text/csv' }).end(text ?? '');
    });
    await new Promise<void>((resolve) => host.listen(0, '127.0.0.1', resolve));
    hostUrl = `http://127.0.0.1:${(host.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    host.closeAllConnections();
    await new Promise((resolve) => host.close(resolve));
  });

  it('of 200 batches, a window at the 150th reads 20 of them or fewer, and finds what reading every batch finds', async () => {
    closeBatches(200);
    downloads.length = 0;
    expect(await window(at(150), at(152))).toEqual(['sdr_150_2', 'sdr_151_2']);
    expect(downloads.length).toBeLessThanOrEqual(20);
    // Of the first hundred, only the doubling probes (1, 3, 7, …, 63).
    expect(downloads.filter((n) => n < 100).length).toBeLessThanOrEqual(6);
    // Every batch read, filtered: the same lines.
    const everything = reader();
    const all = [];
    for (let n = 1; n <= 200; n++) all.push(...(await everything.batch(n))!);
    expect(all.filter((t) => t.createdAt >= at(150) && t.createdAt < at(152)).map((t) => t.id)).toEqual(['sdr_150_2', 'sdr_151_2']);
  });

  it('an empty batch is placed by the next with lines; a window before every batch starts at batch 1; one after every batch finds nothing', async () => {
    closeBatches(10, [4, 5, 6]);
    expect(await window(at(4), at(8))).toEqual(['sdr_7_2']);
    expect(await window(at(0), at(3))).toEqual(['sdr_1_2', 'sdr_2_2']);
    downloads.length = 0;
    expect(await window(at(20), at(30))).toEqual([]);
    expect(downloads.length).toBeLessThanOrEqual(10);
  });
});
