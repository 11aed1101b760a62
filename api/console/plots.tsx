/** @jsxRuntime automatic @jsxImportSource hono/jsx */
import type { FC } from 'hono/jsx';

/**
 * Line plots as inline SVG, drawn on the server: no script, and no inline style (the
 * Content-Security-Policy allows styles from our sheet only): each series' colour is a class
 * of the sheet (`s0`…`s7`), its legend says which PSP it is.
 */

export interface Series {
  name: string;
  /** [time in ms, value]; a gap (no point) where the value is unknown. */
  points: [number, number][];
}

const WIDTH = 640;
const HEIGHT = 180;
const PAD = { left: 56, right: 12, top: 10, bottom: 28 };

const stamp = (ms: number) => new Date(ms).toISOString().replace('T', ' ').slice(0, 16);

export const Plot: FC<{ title: string; series: Series[]; from: number; to: number; max: number; format: (value: number) => string }> = ({ title, series, from, to, max, format }) => {
  const top = max > 0 ? max : 1;
  const x = (t: number) => PAD.left + ((t - from) / Math.max(1, to - from)) * (WIDTH - PAD.left - PAD.right);
  const y = (v: number) => HEIGHT - PAD.bottom - (v / top) * (HEIGHT - PAD.top - PAD.bottom);
  const described = series.map((s) => `${s.name}: ${s.points.length} points`).join('; ');
  return (
    <figure class="plot">
      <figcaption>{title}</figcaption>
      <svg viewBox={`0 0 ${WIDTH} ${HEIGHT}`} role="img" aria-label={`${title}, from ${stamp(from)} to ${stamp(to)} UTC. ${described || 'No data.'}`}>
        <line class="axis" x1={PAD.left} y1={HEIGHT - PAD.bottom} x2={WIDTH - PAD.right} y2={HEIGHT - PAD.bottom} />
        <line class="axis" x1={PAD.left} y1={PAD.top} x2={PAD.left} y2={HEIGHT - PAD.bottom} />
        <line class="grid" x1={PAD.left} y1={y(top / 2)} x2={WIDTH - PAD.right} y2={y(top / 2)} />
        <text class="tick" x={PAD.left - 4} y={PAD.top + 8} text-anchor="end">
          {format(top)}
        </text>
        <text class="tick" x={PAD.left - 4} y={y(top / 2) + 4} text-anchor="end">
          {format(top / 2)}
        </text>
        <text class="tick" x={PAD.left - 4} y={HEIGHT - PAD.bottom} text-anchor="end">
          {format(0)}
        </text>
        <text class="tick" x={PAD.left} y={HEIGHT - 8}>
          {stamp(from)}
        </text>
        <text class="tick" x={WIDTH - PAD.right} y={HEIGHT - 8} text-anchor="end">
          {stamp(to)}
        </text>
        {series.map((s, i) =>
          s.points.length === 1 ? (
            <circle class={`dot s${i % 8}`} cx={x(s.points[0]![0])} cy={y(s.points[0]![1])} r="3" />
          ) : (
            <polyline class={`line s${i % 8}`} points={s.points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' ')} />
          ),
        )}
      </svg>
      <ul class="legend">
        {series.map((s, i) => (
          <li>
            <span class={`swatch s${i % 8}`} aria-hidden="true"></span>
            {s.name}
          </li>
        ))}
      </ul>
    </figure>
  );
};
