/**
 * Success-rate routing: which of a payment's candidate PSPs goes first, learnt from the issuers'
 * answers (docs/routing-and-waits.md, "Success-rate routing").
 *
 * Pure: no I/O, no clock, no randomness of its own. The caller passes the counts it read and one
 * uniform number drawn for the payment, so the same inputs always give the same decision, and the
 * decision, once recorded in the payment's history, is never made again on replay.
 *
 * - Outcomes are counted per PSP and segment (card network, currency, payment method type), each
 *   count recency-weighted: every new outcome of a PSP in a segment first multiplies that pair's
 *   approvals and declines by `decay`, so the counts stay bounded (their sum tends to
 *   1 / (1 - decay)) and old outcomes fade as new ones arrive.
 * - A PSP's estimate for a segment comes from the finest of its levels (network/currency/method,
 *   network/any currency/method, any network/any currency/method, everything) that has at least
 *   `minOutcomes`; with none, from the level with the most; with no outcomes at all, the prior.
 *   The posterior of its approval rate is Beta(prior.approvals + approvals, prior.declines + declines).
 * - Thompson sampling chooses: each PSP with the probability that its approval rate is the
 *   highest under the posteriors (computed, not sampled: `selectionProbabilities`), mixed with a
 *   floor of exploration, `exploration` spread evenly over the candidates. The payment's uniform
 *   number then picks one PSP by those probabilities, which are the decision's record.
 */

/** A segment, as outcomes are counted. `unknown` where the payment method does not say. */
export interface RoutingSegment {
  network: string;
  currency: string;
  methodType: string;
}

/**
 * Recency-weighted counts of the issuers' answers for one PSP in one segment level: over a long
 * memory (`approvals`, `declines`: `decay`) and a short one (`recentApprovals`, `recentDeclines`:
 * `recentDecay`), which tells a fall from noise.
 */
export interface OutcomeCounts {
  approvals: number;
  declines: number;
  recentApprovals: number;
  recentDeclines: number;
}

/** Counts by PSP, then by segment level key (`segmentLevels`). */
export type SegmentCounts = Readonly<Record<string, Readonly<Record<string, OutcomeCounts>>>>;

export interface SuccessRateSettings {
  /** Each new outcome of a PSP in a segment level first multiplies its counts by this. */
  decay: number;
  /** The same, for the short memory. */
  recentDecay: number;
  /**
   * A PSP's approvals in a segment level have fallen when its short memory's rate lies this many
   * standard errors below its long memory's (with at least `minOutcomes / 2` recent outcomes):
   * the long memory then forgets what came before and starts again from the short one
   * (`withOutcome`), so the PSP leaves first place within a few dozen of its payments instead of
   * the long memory's hundreds, and does not come back until its approvals do.
   */
  fallingZ: number;
  /** A level with fewer (weighted) outcomes defers to a coarser one. */
  minOutcomes: number;
  /** The floor of exploration: this share of choices is spread evenly over the candidates. */
  exploration: number;
  /** The prior of a PSP's approval rate, as pseudo-outcomes: Beta(approvals, declines). */
  prior: { approvals: number; declines: number };
}

/**
 * The defaults, chosen with the routing simulation (`npm run bench -- routing-sim`, its scenario
 * fixed first) on seeds other than the ones its report runs: a long memory of about 500 outcomes
 * per PSP and segment level (`decay` 0.998; the fall detector makes a long memory safe) and a short
 * one of about 25 (`recentDecay` 0.96), a fall at 3 standard errors, at least 20 outcomes before a
 * level speaks for itself, the exploration floor of 5 % that the decision engine's defaults also
 * name, and a uniform prior, Beta(1, 1). docs/routing-and-waits.md says where each figure came from.
 */
export const SUCCESS_RATE_DEFAULTS: SuccessRateSettings = {
  decay: 0.998,
  recentDecay: 0.96,
  fallingZ: 3,
  minOutcomes: 20,
  exploration: 0.05,
  prior: { approvals: 1, declines: 1 },
};

/**
 * The segment's levels, finest first, as the store keys them (db/routing.ts):
 * `visa:EUR:card`, `visa:*:card`, `*:*:card`, `*:*:*`.
 */
export function segmentLevels(segment: RoutingSegment): string[] {
  const { network, currency, methodType } = segment;
  return [`${network}:${currency}:${methodType}`, `${network}:*:${methodType}`, `*:*:${methodType}`, '*:*:*'];
}

/**
 * The counts after one more outcome: the old ones faded, then this one added; if the short
 * memory's rate has then fallen below the long memory's (`fallingZ`), the long memory starts
 * again from the short one.
 */
export function withOutcome(counts: OutcomeCounts | undefined, approved: boolean, settings: OutcomeSettings): OutcomeCounts {
  const approval = approved ? 1 : 0;
  const next = {
    approvals: (counts?.approvals ?? 0) * settings.decay + approval,
    declines: (counts?.declines ?? 0) * settings.decay + 1 - approval,
    recentApprovals: (counts?.recentApprovals ?? 0) * settings.recentDecay + approval,
    recentDeclines: (counts?.recentDeclines ?? 0) * settings.recentDecay + 1 - approval,
  };
  return hasFallen(next, settings) ? { ...next, approvals: next.recentApprovals, declines: next.recentDeclines } : next;
}

/** What an outcome's update needs of the settings. */
export type OutcomeSettings = Pick<SuccessRateSettings, 'decay' | 'recentDecay' | 'fallingZ' | 'minOutcomes' | 'prior'>;

/** The short memory's rate lies `fallingZ` standard errors below the long memory's estimate. */
export function hasFallen(counts: OutcomeCounts, settings: OutcomeSettings): boolean {
  const recent = counts.recentApprovals + counts.recentDeclines;
  if (recent < settings.minOutcomes / 2) return false;
  const { prior } = settings;
  const mean = (prior.approvals + counts.approvals) / (prior.approvals + prior.declines + counts.approvals + counts.declines);
  return (counts.recentApprovals / recent - mean) / Math.sqrt((mean * (1 - mean)) / recent) < -settings.fallingZ;
}

export interface Posterior {
  /** Beta(alpha, beta) of the approval rate. */
  alpha: number;
  beta: number;
  /** The level it was read from (`prior` with no outcomes), and the weighted outcomes there. */
  level: string;
  outcomes: number;
}

/** A PSP's posterior for the segment: the finest level with enough outcomes (module comment). */
export function posteriorOf(counts: Readonly<Record<string, OutcomeCounts>> | undefined, segment: RoutingSegment, settings: SuccessRateSettings): Posterior {
  const levels = segmentLevels(segment);
  let best: { level: string; counts: OutcomeCounts } | undefined;
  for (const level of levels) {
    const found = counts?.[level];
    if (!found) continue;
    const n = found.approvals + found.declines;
    if (n >= settings.minOutcomes) {
      best = { level, counts: found };
      break;
    }
    if (!best || n > best.counts.approvals + best.counts.declines) best = { level, counts: found };
  }
  const { prior } = settings;
  if (!best) return { alpha: prior.approvals, beta: prior.declines, level: 'prior', outcomes: 0 };
  return { alpha: prior.approvals + best.counts.approvals, beta: prior.declines + best.counts.declines, level: best.level, outcomes: best.counts.approvals + best.counts.declines };
}

/** The posterior mean of one level's own counts (what GET /admin/routing and /metrics show per segment level). */
export function levelEstimate(counts: Pick<OutcomeCounts, 'approvals' | 'declines'>, settings: Pick<SuccessRateSettings, 'prior'> = SUCCESS_RATE_DEFAULTS): number {
  const { prior } = settings;
  return (prior.approvals + counts.approvals) / (prior.approvals + prior.declines + counts.approvals + counts.declines);
}

export function meanOf(posterior: Posterior): number {
  return posterior.alpha / (posterior.alpha + posterior.beta);
}

/** Points of the grid over which `winProbabilities` integrates. */
const GRID_POINTS = 128;

/**
 * What a candidate is worth as a function of its approval rate x: `scale * x - offset`. The
 * approvals objective is x itself (scale 1, offset 0); the net objective is the amount less the
 * fees charged on approval, times x, less the fees charged per attempt (domain/routing-fees.ts).
 */
export interface CandidateValue {
  scale: number;
  offset: number;
}

const IDENTITY: CandidateValue = { scale: 1, offset: 0 };

/** The smallest scale a value keeps: a candidate whose fees eat the whole amount is worth about -offset whatever x is. */
const MIN_SCALE = 1e-9;

/**
 * The probability that each posterior's value (`values`, default the approval rate itself) is
 * the highest: ∫ f_i(v) Π_{j≠i} F_j(v) dv, integrated on a grid that spans every posterior's mass
 * (mean ± 8 standard deviations, within [0, 1] of the rate); ties within a grid cell are split
 * evenly. Deterministic, and what Thompson sampling would choose each with, without sampling it.
 */
export function winProbabilities(posteriors: readonly Posterior[], values?: readonly CandidateValue[]): number[] {
  const n = posteriors.length;
  if (n === 1) return [1];
  const valueOf = posteriors.map((_, i) => {
    const value = values?.[i] ?? IDENTITY;
    return { scale: Math.max(MIN_SCALE, value.scale), offset: value.offset };
  });
  let lo = Infinity;
  let hi = -Infinity;
  posteriors.forEach((p, i) => {
    const mean = meanOf(p);
    const sd = Math.sqrt((p.alpha * p.beta) / ((p.alpha + p.beta) ** 2 * (p.alpha + p.beta + 1)));
    const { scale, offset } = valueOf[i]!;
    lo = Math.min(lo, scale * Math.max(0, mean - 8 * sd) - offset);
    hi = Math.max(hi, scale * Math.min(1, mean + 8 * sd) - offset);
  });
  const step = (hi - lo) / GRID_POINTS;
  // Each posterior's mass per cell (its density at the cell's middle, normalised over the grid;
  // a posterior narrower than a cell: all of it in its mean's cell), and its mass below each
  // cell plus half its own (an even split of ties).
  const grids = posteriors.map((p, i) => {
    const { scale, offset } = valueOf[i]!;
    const mass = Array.from({ length: GRID_POINTS }, (_, k) => {
      const x = (lo + (k + 0.5) * step + offset) / scale;
      return x > 0 && x < 1 ? (p.alpha - 1) * Math.log(x) + (p.beta - 1) * Math.log1p(-x) : -Infinity;
    });
    const max = Math.max(...mass);
    if (max === -Infinity || step === 0) {
      const cell = step === 0 ? 0 : Math.min(GRID_POINTS - 1, Math.max(0, Math.floor((scale * meanOf(p) - offset - lo) / step)));
      mass.fill(0);
      mass[cell] = 1;
    } else {
      mass.forEach((log, k) => {
        mass[k] = Math.exp(log - max);
      });
    }
    const sum = mass.reduce((a, b) => a + b, 0);
    let acc = 0;
    const below = mass.map((m) => {
      const share = m / sum;
      const half = acc + share / 2;
      acc += share;
      return half;
    });
    return { mass: mass.map((m) => m / sum), below };
  });
  const wins = grids.map((own, i) =>
    own.mass.reduce((total, m, k) => {
      if (m === 0) return total;
      let others = 1;
      grids.forEach((other, j) => {
        if (j !== i) others *= other.below[k]!;
      });
      return total + m * others;
    }, 0),
  );
  const sum = wins.reduce((a, b) => a + b, 0);
  return sum > 0 ? wins.map((w) => w / sum) : posteriors.map(() => 1 / n);
}

export interface SuccessRateCandidate {
  provider: string;
  /** The posterior mean of its approval rate for the segment. */
  approvalEstimate: number;
  /** The probability it was chosen with (all of them add up to 1; 0 while it is eliminated). */
  selectionProbability: number;
  /** Where its estimate came from: the segment level, and the weighted outcomes there. */
  level: string;
  outcomes: number;
  /** With the net objective: the approval estimate times the amount, less the expected fees (minor units). */
  expectedNet?: number;
  /** Why it is out of first place (shared health, a fall of its approvals), if it is. */
  eliminated?: string;
}

export interface SuccessRateDecision {
  strategy: 'success_rate';
  /** In the order the candidates were given. */
  candidates: SuccessRateCandidate[];
  chosen: string;
  /** The chosen PSP is not the one with the highest estimate (expected net with that objective). */
  explored: boolean;
  /** The route: the chosen PSP first, then the others by their estimate, highest first; eliminated ones last. */
  order: string[];
  reason: string;
}

/**
 * The net objective (`routing.objective: "net"`): the payment's amount, and each candidate's
 * fees for it in minor units (domain/routing-fees.ts feesFor): charged on approval, and per
 * attempt. A candidate's expected net is p·(amount − approval fees) − attempt fees.
 */
export interface NetObjective {
  amountMinor: number;
  fees: Readonly<Record<string, { approval: number; attempt: number }>>;
}

/**
 * A payment's worth at a PSP as a function of its approval rate p: `scale * p - offset`, the
 * amount less the approval fees times p, less the attempt fees (always charged).
 */
export function netValueOf(amountMinor: number, fees: { approval: number; attempt: number }): CandidateValue {
  return { scale: amountMinor - fees.approval, offset: fees.attempt };
}

/** The value of a candidate under the net objective (see NetObjective). */
export function netValue(objective: NetObjective, provider: string): CandidateValue {
  return netValueOf(objective.amountMinor, objective.fees[provider] ?? { approval: 0, attempt: 0 });
}

/**
 * Decides which candidate goes first. `uniform` is the payment's own number in [0, 1), drawn
 * once by the caller (a hash of the payment's id in the product, a seeded generator in the
 * simulation). `eliminated` (provider → why) are out of first place: they get no probability
 * and go last, unless every candidate is eliminated (then none is). With `objective` the choice
 * is by expected net instead of the approval rate. `probe` (a candidate whose elimination ended,
 * whose probe this payment took: db/routing.ts takeProbe) goes first, with probability 1.
 */
export function decideSuccessRate(input: {
  candidates: readonly string[];
  segment: RoutingSegment;
  counts: SegmentCounts;
  uniform: number;
  settings?: SuccessRateSettings;
  eliminated?: Readonly<Record<string, string>>;
  objective?: NetObjective;
  probe?: string;
}): SuccessRateDecision {
  const settings = input.settings ?? SUCCESS_RATE_DEFAULTS;
  const { candidates, segment, objective } = input;
  if (candidates.length === 0) throw new RangeError('success-rate routing needs at least one candidate');
  const out = candidates.filter((provider) => input.eliminated?.[provider] !== undefined);
  const eliminated = out.length < candidates.length ? new Set(out) : new Set<string>();
  const posteriors = candidates.map((provider) => posteriorOf(input.counts[provider], segment, settings));
  const values = candidates.map((provider) => (objective ? netValue(objective, provider) : IDENTITY));
  const open = candidates.map((provider, i) => ({ provider, i })).filter(({ provider }) => !eliminated.has(provider));
  const wins = winProbabilities(
    open.map(({ i }) => posteriors[i]!),
    open.map(({ i }) => values[i]!),
  );
  const floor = settings.exploration / open.length;
  const scored: SuccessRateCandidate[] = posteriors.map((posterior, i) => {
    const provider = candidates[i]!;
    const at = open.findIndex((o) => o.i === i);
    const approvalEstimate = meanOf(posterior);
    return {
      provider,
      approvalEstimate,
      selectionProbability: at === -1 ? 0 : floor + (1 - settings.exploration) * wins[at]!,
      level: posterior.level,
      outcomes: posterior.outcomes,
      ...(objective ? { expectedNet: values[i]!.scale * approvalEstimate - values[i]!.offset } : {}),
      ...(eliminated.has(provider) ? { eliminated: input.eliminated![provider]! } : {}),
    };
  });
  if (input.probe !== undefined && candidates.includes(input.probe)) {
    for (const c of scored) c.selectionProbability = c.provider === input.probe ? 1 : 0;
  }
  // The payment's uniform number picks by the probabilities (the last open one takes what rounding leaves).
  let cumulative = 0;
  const chosen = scored.find((c) => c.selectionProbability > 0 && (cumulative += c.selectionProbability) > input.uniform) ?? scored.filter((c) => c.selectionProbability > 0).at(-1)!;
  const worth = (c: SuccessRateCandidate) => c.expectedNet ?? c.approvalEstimate;
  const byValue = [...scored].sort((a, b) => Number(eliminated.has(a.provider)) - Number(eliminated.has(b.provider)) || worth(b) - worth(a));
  const best = byValue[0]!;
  const explored = chosen.provider !== best.provider;
  const order = [chosen.provider, ...byValue.map((c) => c.provider).filter((p) => p !== chosen.provider)];
  const net = (c: SuccessRateCandidate) => (c.expectedNet === undefined ? '' : `, expected net ${c.expectedNet.toFixed(0)}`);
  const estimate = `approval estimate ${chosen.approvalEstimate.toFixed(3)} over ${chosen.outcomes.toFixed(0)} weighted outcomes at ${chosen.level}${net(chosen)}`;
  const highest = objective ? 'expected net' : 'approval estimate';
  const left = scored.filter((c) => c.eliminated !== undefined).map((c) => `${c.provider} eliminated: ${c.eliminated}`);
  const reason =
    (input.probe === chosen.provider ? `probing ${chosen.provider} after its elimination (${estimate}); ` : '') +
    (explored
      ? `explored ${chosen.provider} (probability ${chosen.selectionProbability.toFixed(3)}, ${estimate}); the highest ${highest} is ${best.provider}'s ${worth(best).toFixed(objective ? 0 : 3)}`
      : `${chosen.provider} has the highest ${highest} for ${segmentLevels(segment)[0]} (${estimate}; chosen with probability ${chosen.selectionProbability.toFixed(3)})`) +
    (left.length ? `; ${left.join('; ')}` : '');
  return { strategy: 'success_rate', candidates: scored, chosen: chosen.provider, explored, order, reason };
}

/** Every level's counts of one PSP after one outcome in `segment`. */
export function countsAfterOutcome(counts: Readonly<Record<string, OutcomeCounts>> | undefined, segment: RoutingSegment, approved: boolean, settings: OutcomeSettings): Record<string, OutcomeCounts> {
  const next: Record<string, OutcomeCounts> = { ...counts };
  for (const level of segmentLevels(segment)) next[level] = withOutcome(counts?.[level], approved, settings);
  return next;
}
