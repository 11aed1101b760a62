import { createServer } from 'node:net';
import { readFileSync } from 'node:fs';

/** A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

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

const handedOut = new Set<number>();

/**
 * A TCP port on 127.0.0.1 that is free now, for another process to bind later (a child given
 * it in its environment). A port from freePort() goes back to the kernel's ephemeral range
 * when it is closed, where the kernel hands it to the next socket that asks for any port
 * (every outgoing connection, every listen on port 0, in any process) before the child binds
 * it: on a busy machine it is taken in that moment now and then (EADDRINUSE). This one is
 * drawn at random below that range, where only a process that asks for this very number can
 * take it; never twice by this process.
 */
export async function freePortOutsideEphemeralRange(): Promise<number> {
  const low = ephemeralRangeStart();
  const floor = Math.min(10_000, low - 1000);
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = floor + Math.floor(Math.random() * (low - floor));
    if (handedOut.has(port)) continue;
    if ((await canListen(port, '127.0.0.1')) && (await canListen(port, '0.0.0.0'))) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`no free port found between ${floor} and ${low}`);
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
