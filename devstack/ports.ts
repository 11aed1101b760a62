import { createServer } from 'node:net';
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** The HTTP status `url` answers with within 2 s, or null when it does not answer (a readiness probe). */
export async function httpStatus(url: string): Promise<number | null> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(2000) });
    await response.body?.cancel();
    return response.status;
  } catch {
    return null;
  }
}

/** How long a port handed out stays reserved for the process it was meant for (its bind comes sooner). */
const claimMs = 10 * 60_000;
const claims = path.join(tmpdir(), 'payorch-ports');

/**
 * A TCP port on 127.0.0.1 that is free now, for a process to bind later (often a child given it
 * in its environment). Two ways such a number is lost before the bind, both seen on a busy CI
 * machine as EADDRINUSE, and both closed here:
 * - A port in the kernel's ephemeral range goes to the next socket that asks for any port
 *   (every outgoing connection, every listen on port 0, in any process). So the number is drawn
 *   at random below that range, where only a process asking for this very number can bind it.
 * - Two processes drawing at random may draw the same number while neither has bound it yet
 *   (two tests each launching a stack, a cluster's nodes and a worker's metrics). So a number is
 *   claimed machine-wide by creating a file named after it, exclusively, under the temp folder;
 *   a claim older than ten minutes is void, since its process has bound the port or given up.
 * Below 32768 as well: Temporal's cluster membership table stores ports as SMALLINT.
 */
export async function freePort(): Promise<number> {
  const high = Math.min(ephemeralRangeStart(), 32_768);
  const low = Math.min(10_000, high - 1000);
  mkdirSync(claims, { recursive: true });
  for (let attempt = 0; attempt < 500; attempt++) {
    const port = low + Math.floor(Math.random() * (high - low));
    if (!claim(port)) continue;
    if ((await canListen(port, '127.0.0.1')) && (await canListen(port, '0.0.0.0'))) return port;
  }
  throw new Error(`no free port found between ${low} and ${high}`);
}

function claim(port: number): boolean {
  const file = path.join(claims, String(port));
  try {
    writeFileSync(file, String(process.pid), { flag: 'wx' });
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  try {
    if (Date.now() - statSync(file).mtimeMs < claimMs) return false;
    writeFileSync(file, String(process.pid));
    return true;
  } catch {
    return false;
  }
}

function ephemeralRangeStart(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    if (Number.isInteger(low) && low > 2000) return low;
  } catch {
    // not Linux: the IANA dynamic range, which macOS and Windows use
  }
  return 49152;
}

function canListen(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen({ port, host, exclusive: true }, () => server.close(() => resolve(true)));
  });
}
