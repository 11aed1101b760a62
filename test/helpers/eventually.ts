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
