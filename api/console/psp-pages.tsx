/** @jsxRuntime automatic @jsxImportSource hono/jsx */
import type { FC } from 'hono/jsx';
import { PSP_BUCKETS, type PspBucket, type PspBucketRow } from '../../db/console';
import type { ProviderStanding, SegmentEstimate } from '../../db/routing';
import type { ConsoleSignedIn } from '../context';
import { Layout, Table, when } from './pages';
import { Plot, type Series } from './plots';

/**
 * The PSPs page (GET /console/psps?bucket=5m|1h|1d): per PSP, from its charge attempts in
 * PostgreSQL, the approval rate (approved / approved + declined), the error rate (the PSP
 * failed: rejected, not sent, not charged / attempts with an outcome), its share of the
 * attempts and its latency (an attempt's finish minus its start: median and 95th percentile),
 * per bucket, for every segment or one (`segment=visa:EUR:card`: the attempts' own routing
 * segment); each PSP's health (the breaker the routing decision reads); and the success-rate
 * router's estimates per segment.
 */

export interface PspHealth extends ProviderStanding {
  provider: string;
  eliminatedUntil: Date | null;
}

export interface PspPageData {
  bucket: PspBucket;
  from: number;
  to: number;
  rows: PspBucketRow[];
  providers: string[];
  health: PspHealth[];
  segments: { segment: string; providers: SegmentEstimate[] }[];
  /** The one segment the figures are narrowed to (the attempts' own: `visa:EUR:card`), or null for all. */
  segment: string | null;
  /** The segments of the span's attempts: what the page can be narrowed to. */
  attemptSegments: string[];
}

const percent = (value: number) => `${(value * 100).toFixed(value > 0 && value < 0.1 ? 1 : 0)}%`;
const millis = (value: number) => (value >= 10_000 ? `${(value / 1000).toFixed(0)} s` : `${value.toFixed(0)} ms`);
const ratio = (a: number, b: number) => (b > 0 ? a / b : null);

/** Every PSP's series of one figure (a bucket where it is unknown is a gap). */
function seriesOf(data: PspPageData, figure: (row: PspBucketRow, total: number) => number | null): Series[] {
  const totals = new Map<number, number>();
  for (const row of data.rows) totals.set(row.bucket.getTime(), (totals.get(row.bucket.getTime()) ?? 0) + row.attempts);
  return data.providers.map((provider) => ({
    name: provider,
    points: data.rows
      .filter((r) => r.provider === provider)
      .flatMap((r): [number, number][] => {
        const value = figure(r, totals.get(r.bucket.getTime()) ?? 0);
        return value === null ? [] : [[r.bucket.getTime(), value]];
      }),
  }));
}

/** The whole span's figures of one PSP. */
function summary(rows: PspBucketRow[], provider: string, total: number) {
  const mine = rows.filter((r) => r.provider === provider);
  const sum = (pick: (r: PspBucketRow) => number) => mine.reduce((s, r) => s + pick(r), 0);
  const attempts = sum((r) => r.attempts);
  const approval = ratio(sum((r) => r.approved), sum((r) => r.approved + r.declined));
  const errors = ratio(sum((r) => r.errors), sum((r) => r.finished));
  return [provider, String(attempts), approval === null ? '' : percent(approval), errors === null ? '' : percent(errors), total > 0 ? percent(attempts / total) : ''];
}

/** The page's address for a bucket size and a segment (null: every segment). */
const pspsHref = (bucket: PspBucket, segment: string | null) => `/console/psps?bucket=${bucket}${segment ? `&segment=${encodeURIComponent(segment)}` : ''}`;

const BucketChoice: FC<{ bucket: PspBucket; segment: string | null }> = ({ bucket, segment }) => (
  <nav class="pager" aria-label="Bucket size">
    {(Object.keys(PSP_BUCKETS) as PspBucket[]).map((b) =>
      b === bucket ? (
        <strong aria-current="page">{b} buckets</strong>
      ) : (
        <a href={pspsHref(b, segment)}>{b} buckets</a>
      ),
    )}
  </nav>
);

/** Every segment, or one: the span's attempts' segments (network, currency, method type). */
const SegmentChoice: FC<{ bucket: PspBucket; segment: string | null; segments: string[] }> = ({ bucket, segment, segments }) => (
  <nav class="pager" aria-label="Segment">
    {[null, ...new Set([...segments, ...(segment ? [segment] : [])])].map((s) =>
      s === segment ? (
        <strong aria-current="page">{s ?? 'every segment'}</strong>
      ) : (
        <a href={pspsHref(bucket, s)}>{s ?? 'every segment'}</a>
      ),
    )}
  </nav>
);

export const PspsPage: FC<{ operator: ConsoleSignedIn; data: PspPageData }> = ({ operator, data }) => {
  const total = data.rows.reduce((s, r) => s + r.attempts, 0);
  const latencyMax = Math.max(0, ...data.rows.map((r) => r.p95_ms ?? 0));
  const span = { from: data.from, to: data.to };
  const healthOf = (provider: string) => data.health.find((h) => h.provider === provider);
  return (
    <Layout title="PSPs" operator={operator}>
      <BucketChoice bucket={data.bucket} segment={data.segment} />
      <SegmentChoice bucket={data.bucket} segment={data.segment} segments={data.attemptSegments} />
      <p class="muted">
        From the charge attempts begun since {when(new Date(data.from))} UTC{operator.tenantId ? ` for ${operator.tenantId}` : ', every tenant'}
        {data.segment ? `, segment ${data.segment}` : ', every segment'}, in {data.bucket} buckets. Latency: an attempt's finish minus its start.
      </p>
      <Table
        caption="Health (the breaker the routing decision reads)"
        head={['PSP', 'State', 'Why', 'Probing', 'Out until']}
        rows={data.providers.map((p) => {
          const h = healthOf(p);
          return [p, h?.state ?? 'closed', h?.reason ?? '', h?.probing ? 'yes' : 'no', when(h?.eliminatedUntil ?? null)];
        })}
      />
      <Table caption="Over the whole span" head={['PSP', 'Attempts', 'Approval rate', 'Error rate', 'Share of traffic']} rows={data.providers.filter((p) => data.rows.some((r) => r.provider === p)).map((p) => summary(data.rows, p, total))} />
      <section class="plots">
        <h2>Over time</h2>
        <Plot title="Approval rate" series={seriesOf(data, (r) => ratio(r.approved, r.approved + r.declined))} {...span} max={1} format={percent} />
        <Plot title="Error rate" series={seriesOf(data, (r) => ratio(r.errors, r.finished))} {...span} max={1} format={percent} />
        <Plot title="Share of traffic" series={seriesOf(data, (r, all) => ratio(r.attempts, all))} {...span} max={1} format={percent} />
        <Plot title="Latency, 95th percentile" series={seriesOf(data, (r) => r.p95_ms)} {...span} max={latencyMax} format={millis} />
        <Plot title="Latency, median" series={seriesOf(data, (r) => r.p50_ms)} {...span} max={latencyMax} format={millis} />
      </section>
      <Table
        caption="Per segment (success-rate routing's estimates now)"
        head={['Segment', 'PSP', 'Approval estimate', 'Share lately', 'Approvals', 'Declines', 'Errors']}
        rows={data.segments.flatMap((s) => s.providers.map((p) => [s.segment, p.provider, percent(p.approvalEstimate), percent(p.share), String(p.approvals), String(p.declines), String(p.errors)]))}
      />
    </Layout>
  );
};
