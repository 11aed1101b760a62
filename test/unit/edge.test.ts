import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import type { ApiDeps, AppEnv } from '../../api/context';
import { AuthFailureLimit, sharedFor, WindowCounter } from '../../api/edge';
import { authenticate, errorHandler } from '../../api/middleware';
import { createLogger } from '../../lib/logger';

/**
 * Issue 27 item 7 (the parts of api/edge.ts that need no stack). The failed-authentication limit allowed 31 tries instead of 30 under 400
 * concurrent bad keys. The race needs key lookups that overlap at the limit; here the real
 * `authenticate` middleware runs with a database stand-in whose lookups take 0-20 ms and find
 * no key, so hundreds overlap every time.
 */

function slowEmptyDatabase() {
  return (async () => {
    await new Promise((r) => setTimeout(r, Math.random() * 20));
    return [];
  }) as unknown as ApiDeps['sql'];
}

function appWith(limit: number) {
  const deps = { sql: slowEmptyDatabase(), logger: createLogger({ name: 'test', level: 'silent' }) } as unknown as ApiDeps;
  const app = new Hono<AppEnv>();
  app.use('*', async (c, next) => {
    c.set('logger', deps.logger);
    await next();
  });
  app.onError(errorHandler());
  app.use('/v1/*', authenticate(deps, new AuthFailureLimit(limit)));
  app.get('/v1/payments', (c) => c.json({ ok: true }));
  return app;
}

describe('failed authentication under concurrency', () => {
  for (const [attempts, limit] of [[400, 30], [100, 5], [50, 1]] as const) {
    it(`${attempts} concurrent bad keys with a limit of ${limit}: exactly ${limit} × 401, the rest 429`, async () => {
      const app = appWith(limit);
      const statuses = await Promise.all(
        Array.from({ length: attempts }, (_, i) => Promise.resolve(app.request('/v1/payments', { headers: { authorization: `Bearer sk_bad_${i}` } })).then((r) => r.status)),
      );
      expect(statuses.filter((s) => s === 401)).toHaveLength(limit);
      expect(statuses.filter((s) => s === 429)).toHaveLength(attempts - limit);
    });
  }
});

describe('WindowCounter.idle: the failed-authentication check skips the address lookup only when nothing counts', () => {
  it('is idle before any hit and once the last window has ended, busy while any window runs (rules out skipping a live limit)', () => {
    let now = 1_000;
    const counter = new WindowCounter(60_000, () => now);
    expect(counter.idle()).toBe(true);
    counter.hit('10.0.0.1', 30);
    now += 30_000;
    counter.hit('10.0.0.2', 30);
    now += 59_999;
    // The first window has ended; the second still counts.
    expect(counter.count('10.0.0.1')).toBe(0);
    expect(counter.count('10.0.0.2')).toBe(1);
    expect(counter.idle()).toBe(false);
    now += 1;
    expect(counter.count('10.0.0.2')).toBe(0);
    expect(counter.idle()).toBe(true);
  });
});

describe('/readyz probes its dependencies at most once a second (sharedFor)', () => {
  it('400 concurrent callers share one probe; callers within the second get its answer; the next second probes again', async () => {
    let clock = 0;
    let probes = 0;
    const ready = sharedFor(
      1000,
      async () => {
        probes++;
        await new Promise((r) => setTimeout(r, 20));
        return { postgres: 'ok', probe: probes };
      },
      () => clock,
    );
    const answers = await Promise.all(Array.from({ length: 400 }, () => ready()));
    expect(probes).toBe(1);
    expect(new Set(answers.map((a) => a.probe))).toEqual(new Set([1]));
    clock = 999;
    expect((await ready()).probe).toBe(1);
    clock = 1000;
    expect((await ready()).probe).toBe(2);
    expect(probes).toBe(2);
  });

  it('a failed probe is shared too, and retried after the second', async () => {
    let clock = 0;
    let probes = 0;
    const ready = sharedFor(1000, async () => {
      probes++;
      throw new Error('down');
    }, () => clock);
    await expect(Promise.all([ready(), ready(), ready()])).rejects.toThrow('down');
    expect(probes).toBe(1);
    clock = 1500;
    await expect(ready()).rejects.toThrow('down');
    expect(probes).toBe(2);
  });
});
