import { z } from 'zod';
import { startSandbox } from './server';

const env = z
  .object({
    DATABASE_URL: z.string().min(1).default('postgres://postgres@127.0.0.1:5432/payments'),
    SANDBOX_HOST: z.string().min(1).default('127.0.0.1'),
    SANDBOX_PORT: z.coerce.number().int().min(0).max(65535).default(4010),
    SANDBOX_SLOW_MS: z.coerce.number().int().min(0).default(3000),
    SANDBOX_FLAKY_FAILURES: z.coerce.number().int().min(0).default(2),
    /** Unset: keys are remembered forever. */
    SANDBOX_IDEMPOTENCY_KEY_TTL_SECONDS: z.coerce.number().int().positive().optional(),
  })
  .parse(process.env);

const sandbox = await startSandbox({
  databaseUrl: env.DATABASE_URL,
  host: env.SANDBOX_HOST,
  port: env.SANDBOX_PORT,
  slowMs: env.SANDBOX_SLOW_MS,
  flakyFailures: env.SANDBOX_FLAKY_FAILURES,
  idempotencyKeyTtlSeconds: env.SANDBOX_IDEMPOTENCY_KEY_TTL_SECONDS ?? null,
});
console.log(`provider sandbox listening on ${sandbox.url}`);

let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    sandbox.close().then(
      () => process.exit(0),
      (error: unknown) => {
        console.error('provider sandbox: error while stopping', error);
        process.exit(1);
      },
    );
  });
}
