import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import type { ApiDeps, AppEnv } from '../../api/context';
import type { BlockList } from 'node:net';
import { AuthFailureLimit, clientAddress, sharedFor, WindowCounter } from '../../api/edge';
import { cidrBlockList } from '../../lib/webhook-target';
import { authenticate, errorHandler } from '../../api/middleware';
import { createLogger } from '../../lib/logger';

/**
 * The parts of api/edge.ts that need no stack. The failed-authentication limit must allow exactly 30 tries
 * under 400 concurrent bad keys. The race needs key lookups that overlap at the limit; here the real
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

describe('WindowCounter: each name counts in its own window', () => {
  it('a window ends for its own name only; another name keeps counting (rules out a shared or never-ending window)', () => {
    let now = 1_000;
    const counter = new WindowCounter(60_000, () => now);
    expect(counter.count('10.0.0.1')).toBe(0);
    counter.hit('10.0.0.1', 30);
    now += 30_000;
    counter.hit('10.0.0.2', 30);
    now += 30_000;
    expect(counter.count('10.0.0.1')).toBe(0);
    expect(counter.count('10.0.0.2')).toBe(1);
    now += 30_000;
    expect(counter.count('10.0.0.2')).toBe(0);
  });
});

describe('clientAddress: the socket, or X-Forwarded-For only through TRUSTED_PROXIES', () => {
  const trusted = cidrBlockList('10.0.0.0/8,::1', 'TRUSTED_PROXIES');
  const seen = (socket: string, forwardedFor: string | null, proxies: BlockList | null) => {
    const app = new Hono();
    app.get('/', (c) => c.text(clientAddress(c, proxies)));
    const headers: Record<string, string> = forwardedFor === null ? {} : { 'x-forwarded-for': forwardedFor };
    return Promise.resolve(app.request('/', { headers }, { incoming: { socket: { remoteAddress: socket } } })).then((r) => r.text());
  };
  it('without trusted proxies a forged X-Forwarded-For is ignored: the socket counts', async () => {
    expect(await seen('192.0.2.7', '198.51.100.1', null)).toBe('192.0.2.7');
    expect(await seen('::ffff:192.0.2.7', null, null)).toBe('192.0.2.7');
  });
  it('from a trusted proxy, the nearest hop that is not a proxy counts; hops the client wrote on its left do not', async () => {
    expect(await seen('10.1.2.3', '198.51.100.1', trusted)).toBe('198.51.100.1');
    expect(await seen('10.1.2.3', 'forged, 198.51.100.1, 10.9.9.9', trusted)).toBe('198.51.100.1');
    expect(await seen('10.1.2.3', null, trusted)).toBe('10.1.2.3');
  });
  it('a socket outside TRUSTED_PROXIES is the client, whatever header it sends', async () => {
    expect(await seen('192.0.2.7', '198.51.100.1', trusted)).toBe('192.0.2.7');
  });
  it('outside a server (no socket) every request is "unknown"', async () => {
    const app = new Hono();
    app.get('/', (c) => c.text(clientAddress(c, trusted)));
    expect(await (await app.request('/')).text()).toBe('unknown');
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
