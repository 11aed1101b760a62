import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { freePort } from '../../devstack/ports';

const root = path.resolve(import.meta.dirname, '../..');

/**
 * STRIPE_MOCK_PATH, else the project's own build in .tools/bin (built now by
 * scripts/install-stripe-mock.sh if missing), else the one on PATH the script chose.
 */
function stripeMockBinary(): string {
  const given = process.env.STRIPE_MOCK_PATH;
  if (given && existsSync(given)) return given;
  const own = path.join(root, '.tools', 'bin', 'stripe-mock');
  if (!existsSync(own)) execFileSync('bash', [path.join(root, 'scripts', 'install-stripe-mock.sh')], { stdio: 'inherit' });
  return existsSync(own) ? own : 'stripe-mock';
}

/**
 * Stripe's own mock server on loopback: stateless, but every request is validated against
 * Stripe's OpenAPI definition (unknown or mistyped parameters are a 400, as from Stripe).
 * Both its listeners are bound to 127.0.0.1: left alone it would open HTTPS on all interfaces.
 */
export async function startStripeMock(): Promise<{ port: number; stop(): Promise<void> }> {
  const [httpPort, httpsPort] = [await freePort(), await freePort()];
  const child: ChildProcess = spawn(stripeMockBinary(), ['-http-addr', `127.0.0.1:${httpPort}`, '-https-addr', `127.0.0.1:${httpsPort}`], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`stripe-mock did not start within 30 s:\n${output}`)), 30_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes(`Listening for HTTP at address: 127.0.0.1:${httpPort}`)) {
        clearTimeout(timer);
        child.stdout!.off('data', onData);
        child.stderr!.off('data', onData);
        resolve();
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`stripe-mock exited with ${code}:\n${output}`));
    });
  });
  // Only its start-up lines are of interest; its per-request log is drained unread.
  child.stdout!.resume();
  child.stderr!.resume();
  return {
    port: httpPort,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}
