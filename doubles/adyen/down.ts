import type { Server } from 'node:http';
import { z } from 'zod';

/** The double's outage modes (its `POST /_sandbox/outage`), as server.ts applies them. */
export const outageModes = ['none', 'unavailable', 'down', 'lose-answers'] as const;
export type AdyenDoubleOutageMode = (typeof outageModes)[number];

/** The body of `POST /_sandbox/outage`: a mode, and for `down` how long (ms) before it listens again (absent: until set otherwise through the double's handle, or restarted). */
export const outageBody = z.strictObject({
  mode: z.enum(outageModes, { error: 'mode must be none, unavailable, down or lose-answers' }),
  for_ms: z.int().min(1).max(3_600_000).optional(),
}).refine((body) => body.for_ms === undefined || body.mode === 'down', { message: 'for_ms is for mode down only', path: ['for_ms'] });

/**
 * The double `down`: nothing listens at its address, so a connection is refused and the client
 * knows that nothing was sent (as with a PSP whose servers are gone), and every open connection
 * is closed. `up` listens again at the same address. Only the double's handle or `for_ms` can
 * end it: its own control route is down too.
 */
export class Listening {
  private timer: NodeJS.Timeout | null = null;
  private isDown = false;

  constructor(private readonly server: Server, private readonly port: number) {}

  get down(): boolean {
    return this.isDown;
  }

  goDown(forMs?: number): void {
    this.clearTimer();
    if (forMs !== undefined) this.timer = setTimeout(() => void this.up().catch((error: Error) => process.stderr.write(`adyen double: could not listen again: ${error.message}\n`)), forMs);
    if (this.isDown) return;
    this.isDown = true;
    this.server.close();
    this.server.closeAllConnections();
  }

  async up(): Promise<void> {
    this.clearTimer();
    if (!this.isDown) return;
    this.isDown = false;
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.port, '127.0.0.1', () => (this.server.off('error', reject), resolve()));
    });
  }

  clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
