/**
 * The one way a test waits: for a condition, never for a fixed time. Polls `check` every
 * `intervalMs` until it returns a truthy value, which it returns; throws once `timeoutMs` has
 * passed, naming `what` was awaited.
 */
export async function eventually<T>(
  check: () => Promise<T | null | undefined | false> | T | null | undefined | false,
  timeoutMs = 20_000,
  intervalMs = 100,
  what = 'condition',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`${what} not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/**
 * The one way a test waits a fixed time, where the time itself is the point: a fault held for a
 * set time, a state shown to last, a client's pause between its retries. `why` says which.
 */
export async function holdFor(ms: number, why: string): Promise<void> {
  if (!why) throw new Error('holdFor: say why the time is the point');
  await new Promise((resolve) => setTimeout(resolve, ms));
}
