import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { openSync } from 'node:fs';
import path from 'node:path';
import { projectRoot } from './temporal-cli';

/** Jaeger all-in-one for `TRACING=on npm start` (docs/tracing.md): .tools/bin/jaeger, built on first use. */
export const jaegerBinary = path.join(projectRoot, '.tools', 'bin', 'jaeger');

/** Builds Jaeger into .tools/ once (several minutes the first time; scripts/install-jaeger.sh). */
export function ensureJaeger(): void {
  const script = path.join(projectRoot, 'scripts', 'install-jaeger.sh');
  const result = spawnSync('bash', [script], { stdio: ['ignore', 'inherit', 'inherit'] });
  if (result.status !== 0) throw new Error(`building Jaeger failed (${script})`);
}

export interface RunningJaeger {
  process: ChildProcess;
  uiUrl: string;
  /** What OTEL_EXPORTER_OTLP_ENDPOINT names for the product's processes. */
  otlpEndpoint: string;
  stop(): Promise<void>;
}

/**
 * Starts Jaeger with devstack/jaeger.yaml (OTLP/HTTP receiver and UI on loopback, traces in
 * memory), its log in `dataDir`/jaeger.log, and resolves once its UI answers.
 */
export async function startJaeger(options: { dataDir: string; uiPort: number; otlpPort: number; queryGrpcPort: number; timeoutMs?: number }): Promise<RunningJaeger> {
  const log = openSync(path.join(options.dataDir, 'jaeger.log'), 'a');
  const child = spawn(jaegerBinary, ['--config', path.join(projectRoot, 'devstack', 'jaeger.yaml')], {
    stdio: ['ignore', log, log],
    env: { ...process.env, JAEGER_UI_PORT: String(options.uiPort), JAEGER_OTLP_PORT: String(options.otlpPort), JAEGER_QUERY_GRPC_PORT: String(options.queryGrpcPort) },
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const uiUrl = `http://127.0.0.1:${options.uiPort}`;
  const deadline = Date.now() + (options.timeoutMs ?? 30_000);
  for (;;) {
    if (child.exitCode !== null) throw new Error(`Jaeger exited (${child.exitCode}); see ${path.join(options.dataDir, 'jaeger.log')}`);
    const answered = await fetch(uiUrl).then((r) => r.ok, () => false);
    if (answered) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`Jaeger's UI did not answer on ${uiUrl}; see ${path.join(options.dataDir, 'jaeger.log')}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return {
    process: child,
    uiUrl,
    otlpEndpoint: `http://127.0.0.1:${options.otlpPort}`,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
