/**
 * `npm run bench -- routing-sim [--seeds N] [--first-seed S] [--out DIR]`: the routing simulation
 * (scenario.ts) for our strategy, a static best-on-average list and the decision engine's defaults
 * (sim.ts), over N seeds (default 10) from S (default 1001: the defaults were chosen on seeds 1 to 3,
 * so the report runs others). Writes routing-sim.md and routing-sim.json to DIR (default
 * bench/results). No Temporal, no PostgreSQL.
 */
import { SUCCESS_RATE_DEFAULTS } from '../../domain/routing-success-rate';
import { scenario, SIM_SEEDS } from './scenario';
import { option, writeResults } from '../common';
import { decisionEngineBaseline, runStrategy, staticBestStrategy, successRateStrategy, type SimRun, type SimStrategy } from './sim';

/** The payment of the falling segment after the change at which its PSP's probability is read (1-based). */
const FALLING_AT = 200;

interface StrategySummary {
  strategy: string;
  regretMean: number;
  regretSd: number;
  approvalRateMean: number;
  runs: Array<Pick<SimRun, 'seed' | 'regret' | 'approvals'>>;
}

function meanSd(values: number[]): { mean: number; sd: number } {
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  const sd = Math.sqrt(values.reduce((a, b) => a + (b - mean) ** 2, 0) / Math.max(1, values.length - 1));
  return { mean, sd };
}

const round = (value: number, digits = 1) => Math.round(value * 10 ** digits) / 10 ** digits;

export async function runRoutingSimulation(args: string[]): Promise<void> {
  const seedCount = Number(option(args, '--seeds', String(SIM_SEEDS)));
  const firstSeed = Number(option(args, '--first-seed', '1001'));
  const out = option(args, '--out', 'bench/results');
  const seeds = Array.from({ length: seedCount }, (_, i) => firstSeed + i);
  const strategies: Array<() => SimStrategy> = [() => successRateStrategy(scenario.providers), () => decisionEngineBaseline(scenario.providers), () => staticBestStrategy(scenario)];
  const started = Date.now();
  const runs: SimRun[][] = strategies.map((make) =>
    seeds.map((seed) => {
      const run = runStrategy(scenario, seed, make());
      console.log(`[routing-sim] ${run.strategy} seed ${seed}: regret ${run.regret.toFixed(1)}, approvals ${run.approvals}`);
      return run;
    }),
  );
  const summaries: StrategySummary[] = runs.map((of) => {
    const regret = meanSd(of.map((r) => r.regret));
    return {
      strategy: of[0]!.strategy,
      regretMean: round(regret.mean),
      regretSd: round(regret.sd),
      approvalRateMean: round(of.reduce((a, r) => a + r.approvals / r.payments, 0) / of.length, 4),
      runs: of.map((r) => ({ seed: r.seed, regret: round(r.regret), approvals: r.approvals })),
    };
  });
  const [ours, baseline] = summaries as [StrategySummary, StrategySummary, StrategySummary];
  const reduction = round((1 - ours.regretMean / baseline.regretMean) * 100);
  const falling = runs[0]!.map((r) => r.fallingProbabilities![FALLING_AT - 1] ?? 1);
  const fallingSummary = { at: FALLING_AT, mean: round(meanSd(falling).mean, 4), max: round(Math.max(...falling), 4), perSeed: falling.map((p) => round(p, 4)) };
  const verdict = {
    regretReductionPercent: reduction,
    regretTargetMet: reduction >= 25,
    fallingTargetMet: fallingSummary.max < 0.1,
  };
  const results = { scenario, seeds, settings: SUCCESS_RATE_DEFAULTS, seconds: round((Date.now() - started) / 1000), summaries, falling: fallingSummary, verdict, node: process.version };
  writeResults(out, 'routing-sim', results, report(results));
  console.log(`[routing-sim] regret: ours ${ours.regretMean} ± ${ours.regretSd}, baseline ${baseline.regretMean} ± ${baseline.regretSd} (${reduction} % lower); ` + `falling PSP at its segment's ${FALLING_AT}th payment: max ${fallingSummary.max}; wrote ${out}/routing-sim.md`);
}

function report(results: {
  scenario: typeof scenario;
  seeds: number[];
  settings: typeof SUCCESS_RATE_DEFAULTS;
  seconds: number;
  summaries: StrategySummary[];
  falling: { at: number; mean: number; max: number; perSeed: number[] };
  verdict: { regretReductionPercent: number; regretTargetMet: boolean; fallingTargetMet: boolean };
}): string {
  const { scenario: s, summaries, falling, verdict } = results;
  const lines = [
    '# Routing simulation',
    '',
    `\`npm run bench -- routing-sim\` (bench/routing-sim/): ${s.payments.toLocaleString('en')} payments per seed, seeds ${results.seeds[0]} to ${results.seeds.at(-1)}, ${results.seconds} s. No Temporal, no PostgreSQL: our strategy is the decision code the product calls (domain/routing-success-rate.ts). Regret is expected regret: over every payment, the best PSP's approval rate at that moment minus the chosen one's.`,
    '',
    `The scenario (bench/routing-sim/scenario.ts): ${s.providers.join(', ')}; at payment ${s.change.atPayment.toLocaleString('en')} ${s.change.provider}'s ${s.change.segment.network} ${s.change.segment.currency} approvals fall to ${s.change.rate}.`,
    '',
    '| segment | share | ' + s.providers.join(' | ') + ' |',
    '|---|---|' + s.providers.map(() => '---|').join(''),
    ...s.mix.map((m) => `| ${m.segment.network} ${m.segment.currency} ${m.segment.methodType} | ${m.share} | ${s.providers.map((p) => m.rates[p]).join(' | ')} |`),
    '',
    '| strategy | mean regret | sd | mean approval rate |',
    '|---|---|---|---|',
    ...summaries.map((r) => `| ${r.strategy} | ${r.regretMean} | ${r.regretSd} | ${r.approvalRateMean} |`),
    '',
    `- Ours against the baseline: mean regret ${verdict.regretReductionPercent} % lower (target: at least 25 %): ${verdict.regretTargetMet ? 'met' : 'NOT met'}.`,
    `- The falling PSP's selection probability for its segment at that segment's ${falling.at}th payment after the change: mean ${falling.mean}, max ${falling.max} over the seeds (target: under 0.1): ${verdict.fallingTargetMet ? 'met' : 'NOT met'}. Per seed: ${falling.perSeed.join(', ')}.`,
    `- Settings: ${JSON.stringify(results.settings)}.`,
    '',
    '| seed | ' + summaries.map((r) => r.strategy).join(' | ') + ' |',
    '|---|' + summaries.map(() => '---|').join(''),
    ...results.seeds.map((seed, i) => `| ${seed} | ${summaries.map((r) => r.runs[i]!.regret).join(' | ')} |`),
    '',
  ];
  return lines.join('\n');
}
