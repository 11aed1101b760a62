import { describe, expect, it } from 'vitest';
import { createLogger } from '../../lib/logger';
import { createWorkerMetrics } from '../../lib/metrics';
import { orderWithHealth, ProviderHealth, type BreakerSettings } from '../../worker/provider-health';

/** The circuit breaker per PSP, on a fake clock. */
function setup(settings: Partial<BreakerSettings> = {}) {
  let now = 1_000_000;
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger({ name: 'test', level: 'info', destination: { write: (line: string) => void lines.push(JSON.parse(line)) } });
  const metrics = createWorkerMetrics();
  const health = new ProviderHealth({ now: () => now, metrics, logger, providers: ['sandbox-a', 'sandbox-b'], settings });
  const advance = (ms: number) => void (now += ms);
  const fail = (provider: string, times: number) => {
    for (let i = 0; i < times; i++) health.record(provider, 'error');
  };
  const succeed = (provider: string, times: number) => {
    for (let i = 0; i < times; i++) health.record(provider, 'ok');
  };
  const gauge = async (provider: string) => (await metrics.providerCircuitState.get()).values.find((v) => v.labels.provider === provider)?.value;
  const transitions = async () => (await metrics.providerCircuitTransitions.get()).values.map((v) => `${v.labels.provider}:${v.labels.from}->${v.labels.to}=${v.value}`);
  return { health, advance, fail, succeed, gauge, transitions, lines, metrics };
}

describe('provider circuit breaker', () => {
  it('opens at 50 % errors over at least 5 calls within 30 s, not before', async () => {
    const { health, fail, succeed, gauge } = setup();
    fail('sandbox-a', 4);
    expect(health.state('sandbox-a')).toBe('closed'); // 4 calls: too few to judge
    succeed('sandbox-a', 4);
    fail('sandbox-a', 3); // 7 errors of 11: 64 %
    expect(health.state('sandbox-a')).toBe('open');
    expect(await gauge('sandbox-a')).toBe(2);
    expect(health.state('sandbox-b')).toBe('closed');
    expect(await gauge('sandbox-b')).toBe(0);
  });

  it('stays closed below the error rate, and forgets outcomes older than the window', () => {
    const { health, fail, succeed, advance } = setup();
    succeed('sandbox-a', 6);
    fail('sandbox-a', 5); // 5 of 11: 45 %
    expect(health.state('sandbox-a')).toBe('closed');
    advance(30_000); // the whole window has passed
    fail('sandbox-a', 4); // 4 of 4, but fewer than 5 calls
    expect(health.state('sandbox-a')).toBe('closed');
    fail('sandbox-a', 1);
    expect(health.state('sandbox-a')).toBe('open');
  });

  it('open for the cool-down, then half-open: one probe goes first, the others still try elsewhere first', async () => {
    const { health, fail, advance, gauge } = setup();
    fail('sandbox-a', 5);
    expect(health.order(['sandbox-a', 'sandbox-b'])).toEqual(['sandbox-b', 'sandbox-a']);
    advance(29_999);
    expect(health.state('sandbox-a')).toBe('open');
    advance(1);
    expect(await gauge('sandbox-a')).toBe(1); // a scrape sees the cool-down's end
    expect(health.state('sandbox-a')).toBe('half_open');
    expect(health.order(['sandbox-a', 'sandbox-b'])).toEqual(['sandbox-a', 'sandbox-b']); // the probe
    expect(health.order(['sandbox-a', 'sandbox-b'])).toEqual(['sandbox-b', 'sandbox-a']); // no probe left
    // Behind a healthy provider it keeps its place, taking no probe.
    expect(health.order(['sandbox-b', 'sandbox-a'])).toEqual(['sandbox-b', 'sandbox-a']);
  });

  it('half-open: a probe given back (its payment went to the PSP an earlier try recorded) is free for the next payment', () => {
    const { health, fail, advance } = setup();
    fail('sandbox-a', 5);
    advance(30_000);
    expect(health.order(['sandbox-a', 'sandbox-b'])).toEqual(['sandbox-a', 'sandbox-b']); // a re-run's plan takes the probe
    health.release('sandbox-a'); // ... but its attempt 1 was recorded at sandbox-b
    expect(health.state('sandbox-a')).toBe('half_open');
    expect(health.order(['sandbox-a', 'sandbox-b'])).toEqual(['sandbox-a', 'sandbox-b']); // the next payment probes
    expect(health.order(['sandbox-a', 'sandbox-b'])).toEqual(['sandbox-b', 'sandbox-a']);
    health.release('sandbox-b'); // a closed provider has no probe to give back: nothing changes
    expect(health.state('sandbox-b')).toBe('closed');
  });

  it("half-open: the probe's success closes the circuit", async () => {
    const { health, fail, advance, transitions, lines } = setup();
    fail('sandbox-a', 5);
    advance(30_000);
    expect(health.order(['sandbox-a', 'sandbox-b'])[0]).toBe('sandbox-a');
    health.record('sandbox-a', 'ok');
    expect(health.state('sandbox-a')).toBe('closed');
    expect(health.order(['sandbox-a', 'sandbox-b'])).toEqual(['sandbox-a', 'sandbox-b']);
    expect(await transitions()).toEqual(['sandbox-a:closed->open=1', 'sandbox-a:open->half_open=1', 'sandbox-a:half_open->closed=1']);
    expect(lines.map((l) => [l.level, l.msg, l.provider, l.from, l.to])).toEqual([
      [40, 'provider circuit open: sandbox-a', 'sandbox-a', 'closed', 'open'],
      [30, 'provider circuit half-open: sandbox-a', 'sandbox-a', 'open', 'half_open'],
      [30, 'provider circuit closed: sandbox-a', 'sandbox-a', 'half_open', 'closed'],
    ]);
    expect(lines[0]!.reason).toBe('5 errors in 5 calls within 30 s');
    // Closed again with a fresh window: one error does not reopen it.
    health.record('sandbox-a', 'error');
    expect(health.state('sandbox-a')).toBe('closed');
  });

  it("half-open: the probe's failure reopens it for another cool-down", async () => {
    const { health, fail, advance, transitions, gauge } = setup();
    fail('sandbox-a', 5);
    advance(30_000);
    health.order(['sandbox-a']);
    health.record('sandbox-a', 'error');
    expect(health.state('sandbox-a')).toBe('open');
    expect(await gauge('sandbox-a')).toBe(2);
    advance(29_000);
    expect(health.state('sandbox-a')).toBe('open');
    advance(1_000);
    expect(health.state('sandbox-a')).toBe('half_open');
    expect(await transitions()).toEqual(['sandbox-a:closed->open=1', 'sandbox-a:open->half_open=2', 'sandbox-a:half_open->open=1']);
  });

  it('ignores outcomes of calls begun before it opened, and of non-probes while half-open', () => {
    const { health, fail, succeed, advance } = setup();
    fail('sandbox-a', 5);
    succeed('sandbox-a', 10); // in flight when it opened
    expect(health.state('sandbox-a')).toBe('open');
    advance(30_000);
    succeed('sandbox-a', 1); // no probe was let through: not a probe's outcome
    expect(health.state('sandbox-a')).toBe('half_open');
  });

  it('a probe that never reports is released after its timeout', () => {
    const { health, fail, advance } = setup({ probeTimeoutMs: 10_000 });
    fail('sandbox-a', 5);
    advance(30_000);
    expect(health.order(['sandbox-a', 'sandbox-b'])[0]).toBe('sandbox-a');
    expect(health.order(['sandbox-a', 'sandbox-b'])[0]).toBe('sandbox-b');
    advance(10_000);
    expect(health.order(['sandbox-a', 'sandbox-b'])[0]).toBe('sandbox-a');
  });

  it('never drops a provider: all open keeps the order', () => {
    const { health, fail } = setup();
    fail('sandbox-a', 5);
    fail('sandbox-b', 5);
    expect(health.order(['sandbox-b', 'sandbox-a'])).toEqual(['sandbox-b', 'sandbox-a']);
    expect(health.order(['sandbox-a', 'stripe', 'sandbox-b'])).toEqual(['stripe', 'sandbox-a', 'sandbox-b']);
    expect(health.order([])).toEqual([]);
  });

  it('orderWithHealth moves open providers last and says why', () => {
    const { health, fail, advance } = setup();
    const decision = { providers: ['sandbox-a', 'sandbox-b'], reason: 'split picked sandbox-a (weight 70 of 100), then the fallback order' };
    expect(orderWithHealth(decision, health)).toEqual(decision);
    fail('sandbox-a', 5);
    expect(orderWithHealth(decision, health)).toEqual({
      providers: ['sandbox-b', 'sandbox-a'],
      reason: 'split picked sandbox-a (weight 70 of 100), then the fallback order; circuit sandbox-a open: tried sandbox-b, sandbox-a',
    });
    advance(30_000);
    expect(orderWithHealth(decision, health)).toEqual({ providers: ['sandbox-a', 'sandbox-b'], reason: `${decision.reason}; circuit sandbox-a half-open` });
    // The routing's decline codes pass through.
    expect(orderWithHealth({ ...decision, retryableDeclineCodes: ['processing_error'] }, health).retryableDeclineCodes).toEqual(['processing_error']);
  });

  it('refuses nonsense settings', () => {
    expect(() => new ProviderHealth({ settings: { errorRate: 0 } })).toThrow(/errorRate/);
    expect(() => new ProviderHealth({ settings: { minCalls: 0 } })).toThrow(/minCalls/);
  });

  it('shows on the worker metrics as provider_circuit_state and provider_circuit_transitions_total', async () => {
    const { fail, metrics } = setup();
    fail('sandbox-b', 5);
    const text = await metrics.registry.metrics();
    expect(text).toContain('provider_circuit_state{provider="sandbox-a"} 0');
    expect(text).toContain('provider_circuit_state{provider="sandbox-b"} 2');
    expect(text).toContain('provider_circuit_transitions_total{provider="sandbox-b",from="closed",to="open"} 1');
  });
});
