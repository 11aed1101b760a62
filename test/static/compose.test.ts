import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, inject, it } from 'vitest';
import { parse } from 'yaml';
import { Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { assertSafeCodecServer, configVariables, loadConfig, loadUiGuardConfig } from '../../lib/config';
import { projectRoot, resolveTemporalCli, searchAttributeFlags } from '../../devstack/temporal-cli';
import { kindSettingVariables } from '../../provider/registry';

/**
 * docker-compose.yml, Dockerfile and deploy/ (the production-shaped stack), checked without
 * a Docker engine: the file is parsed as Compose parses it (YAML merge keys, `${VAR...}`
 * interpolation) and its wiring is checked against the code that will run in it
 * (lib/config.ts, sandbox/main.ts, devstack/temporal-cli.ts). The two scripts that talk to
 * Temporal (temporal-setup and the worker healthcheck) are run for real against the test
 * run's Temporal server. `docker compose config` itself is not run: this machine has no
 * Compose plugin.
 */

const execFileAsync = promisify(execFile);
const root = projectRoot;
const read = (file: string) => readFileSync(path.join(root, file), 'utf8');

interface Healthcheck {
  test?: string | string[];
  disable?: boolean;
}
interface Service {
  image?: string;
  build?: unknown;
  profiles?: string[];
  command?: string | string[];
  entrypoint?: string | string[];
  environment?: Record<string, string | number | boolean | null> | string[];
  ports?: (string | { target: number; published?: string | number; host_ip?: string })[];
  volumes?: (string | { type?: string; source?: string; target: string })[];
  depends_on?: string[] | Record<string, { condition?: string }>;
  healthcheck?: Healthcheck;
  restart?: string;
  deploy?: { replicas?: number };
  container_name?: string;
}
interface ComposeFile {
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
}

const raw = parse(read('docker-compose.yml'), { merge: true }) as ComposeFile;

/** A valid admin token, the one variable the file refuses to run without. */
const hostEnv = { ADMIN_TOKEN: 'compose-test-admin-token-0123456789', TEMPORAL_PAYLOAD_KEYS: `k1:${Buffer.alloc(32, 7).toString('base64')}` };

/**
 * Compose's interpolation of one string: $$, $VAR, ${VAR}, ${VAR:-default}, ${VAR-default},
 * ${VAR:?error}, ${VAR?error}, ${VAR:+alt}, ${VAR+alt}.
 */
function interpolate(value: string, env: Record<string, string | undefined>): string {
  return value.replace(
    /\$(?:(\$)|([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?)([-?+])([^}]*))?\})/g,
    (_match, dollar: string | undefined, bare: string | undefined, name: string | undefined, colon: string, op: string, arg: string) => {
      if (dollar) return '$';
      const key = (bare ?? name)!;
      const current = env[key];
      const missing = colon ? !current : current === undefined;
      if (!op) return current ?? '';
      if (op === '-') return missing ? arg : current!;
      if (op === '?') {
        if (missing) throw new Error(`required variable ${key} is missing a value: ${arg}`);
        return current!;
      }
      return missing ? '' : arg; // '+'
    },
  );
}

function resolve<T>(node: T, env: Record<string, string | undefined>): T {
  if (typeof node === 'string') return interpolate(node, env) as T;
  if (Array.isArray(node)) return node.map((item) => resolve(item, env)) as T;
  if (node && typeof node === 'object') {
    return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, resolve(v, env)])) as T;
  }
  return node;
}

const compose = resolve(raw, hostEnv);
const services = compose.services;
const service = (name: string): Service => {
  const found = services[name];
  if (!found) throw new Error(`no service ${name}`);
  return found;
};

/** A service's environment as the container gets it: keys without a value are unset. */
function envOf(name: string, from: ComposeFile = compose): Record<string, string> {
  const env = from.services[name]?.environment ?? {};
  const entries = Array.isArray(env)
    ? env.map((line) => (line.includes('=') ? [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)] : [line, null]))
    : Object.entries(env);
  return Object.fromEntries(entries.filter(([, v]) => v !== null && v !== undefined).map(([k, v]) => [k, String(v)]));
}
/** Every variable a service declares, with or without a value. */
const declaredEnv = (name: string): string[] => {
  const env = service(name).environment ?? {};
  return Array.isArray(env) ? env.map((line) => line.split('=')[0]!) : Object.keys(env);
};

const argv = (value: string | string[] | undefined): string[] =>
  value === undefined ? [] : Array.isArray(value) ? value.map(String) : value.split(/\s+/).filter(Boolean);

function dependsOn(name: string): Record<string, string> {
  const deps = service(name).depends_on ?? {};
  if (Array.isArray(deps)) return Object.fromEntries(deps.map((d) => [d, 'service_started']));
  return Object.fromEntries(Object.entries(deps).map(([d, spec]) => [d, spec?.condition ?? 'service_started']));
}

interface Published {
  hostIp: string | null;
  published: number | null;
  target: number;
}
function publishedPorts(name: string): Published[] {
  return (service(name).ports ?? []).map((port) => {
    if (typeof port === 'object') {
      return { hostIp: port.host_ip ?? null, published: port.published === undefined ? null : Number(port.published), target: Number(port.target) };
    }
    const [spec] = String(port).split('/');
    const parts = spec!.split(':');
    const target = Number(parts.pop());
    const published = parts.length ? Number(parts.pop()) : null;
    return { hostIp: parts.length ? parts.join(':') : null, published, target };
  });
}

/** Host path of a container path, through the service's bind mounts (relative to the project). */
function hostPathOf(name: string, containerPath: string): string | null {
  for (const volume of service(name).volumes ?? []) {
    let source: string | undefined;
    let target: string;
    if (typeof volume === 'string') {
      const parts = volume.split(':');
      if (parts.length < 2) continue;
      [source, target] = [parts[0], parts[1]!];
    } else {
      [source, target] = [volume.source, volume.target];
    }
    if (!source || !/^\.{1,2}\//.test(source)) continue; // named volume
    if (containerPath === target || containerPath.startsWith(`${target}/`)) {
      return path.join(root, source, containerPath.slice(target.length));
    }
  }
  return null;
}

/** The top-level keys of a z.object({...}) schema in a source file. */
function schemaKeys(file: string): string[] {
  const source = read(file);
  const start = source.indexOf('z\n  .object({') >= 0 ? source.indexOf('z\n  .object({') : source.indexOf('.object({');
  const body = source.slice(start, source.indexOf('\n  })', start));
  return [...body.matchAll(/^ {4}([A-Z][A-Z0-9_]*):/gm)].map((m) => m[1]!);
}
/** Every variable lib/config.ts reads. */
const configKeys = [...configVariables];
const sandboxKeys = schemaKeys('sandbox/main.ts');

const oneShots = ['temporal-schema', 'temporal-setup', 'migrate'];
const longRunning = ['postgres', 'temporal', 'temporal-ui', 'temporal-ui-guard', 'sandbox', 'sandbox-b', 'api', 'worker', 'codec-server', 'jaeger'];
/** The two stand-in PSPs and the names PROVIDERS gives them. */
const sandboxServices = { 'sandbox-a': 'sandbox', 'sandbox-b': 'sandbox-b' } as const;
const orchestratorServices = ['migrate', 'api', 'worker'];

describe('docker-compose.yml: services', () => {
  it('has exactly the expected services', () => {
    expect(Object.keys(services).sort()).toEqual([...oneShots, ...longRunning].sort());
  });

  it('publishes api 3000, temporal 7233, temporal-ui-guard 8233, sandbox 4010, sandbox-b 4011, codec-server 8888 and jaeger 16686, and nothing else', () => {
    const expected: Record<string, { published: number; target: number }> = {
      api: { published: 3000, target: 3000 },
      temporal: { published: 7233, target: 7233 },
      'temporal-ui-guard': { published: 8233, target: 8233 },
      sandbox: { published: 4010, target: 4010 },
      'sandbox-b': { published: 4011, target: 4011 },
      'codec-server': { published: 8888, target: 8888 },
      jaeger: { published: 16686, target: 16686 },
    };
    for (const name of Object.keys(services)) {
      const ports = publishedPorts(name).map(({ published, target }) => ({ published, target }));
      expect(ports, name).toEqual(expected[name] ? [expected[name]] : []);
    }
    // The unauthenticated surfaces stay on the loopback interface.
    for (const name of ['temporal', 'temporal-ui-guard', 'sandbox', 'sandbox-b', 'codec-server', 'jaeger']) expect(publishedPorts(name)[0]!.hostIp, name).toBe('127.0.0.1');
    // The codec server admits the UI's origin, as the browser sees it, and no other.
    expect(envOf('codec-server').CODEC_CORS_ORIGINS).toBe(envOf('temporal-ui').TEMPORAL_CORS_ORIGINS);
  });

  it('Jaeger is opt-in (profile tracing) and what it is sent the product names: the app environment passes the OTLP endpoint through, empty (tracing off) by default', () => {
    expect(raw.services.jaeger!).toMatchObject({ profiles: ['tracing'], image: 'jaegertracing/jaeger:1.75.0' });
    for (const name of ['api', 'worker']) {
      expect(declaredEnv(name), name).toEqual(expect.arrayContaining(['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_TRACES_SAMPLER', 'OTEL_TRACES_SAMPLER_ARG']));
      expect(envOf(name).OTEL_EXPORTER_OTLP_ENDPOINT, name).toBeUndefined();
    }
  });

  it('the codec server is secure by default: opt-in profile, no token default (it refuses to start without one), /encode off, loopback only', () => {
    expect(raw.services['codec-server']!).toMatchObject({ profiles: ['codec'] });
    expect(declaredEnv('codec-server')).toContain('CODEC_TOKEN');
    const env = envOf('codec-server');
    expect(env.CODEC_TOKEN).toBeUndefined();
    expect(env.CODEC_ENABLE_ENCODE).toBeUndefined();
    expect(publishedPorts('codec-server').map((p) => p.hostIp)).toEqual(['127.0.0.1']);
    // What the container's process would do with this environment: refuse to start…
    expect(() => assertSafeCodecServer(loadConfig(env))).toThrow(/without CODEC_TOKEN/);
    // …until the operator gives a token; then it serves the UI's origin, /encode off.
    // (A key without a value takes the host's value, as Compose passes it through.)
    const withToken = { ...env, CODEC_TOKEN: randomBytes(24).toString('hex') };
    const config = loadConfig(withToken);
    expect(() => assertSafeCodecServer(config)).not.toThrow();
    expect(config.CODEC_ENABLE_ENCODE).toBe(false);
    expect(config.CODEC_CORS_ORIGINS).toEqual([envOf('temporal-ui').TEMPORAL_CORS_ORIGINS]);
  });

  it('each service called by name across the network lets that name through its Host check', () => {
    // The workers call each sandbox by the name PROVIDERS gives it; every other listener is reached through loopback.
    for (const connection of loadConfig(envOf('worker')).PROVIDERS) {
      const host = new URL(connection.settings.url).hostname;
      expect(envOf(host).HTTP_ALLOWED_HOSTS!.split(','), connection.name).toContain(host);
    }
    for (const name of orchestratorServices) expect(envOf(name).HTTP_ALLOWED_HOSTS, name).toBeUndefined(); // loopback names: the healthchecks
  });

  it('the Web UI is reached only through its guard (lib/ui-guard-main.ts), which forwards to the UI on the compose network', () => {
    expect(publishedPorts('temporal-ui')).toEqual([]);
    const guard = service('temporal-ui-guard');
    expect(guard.build).toBeDefined();
    expect(dependsOn('temporal-ui-guard')).toEqual({ 'temporal-ui': 'service_healthy' });
    // It reads only its own variables (no secret of the app's), as lib/config.ts parses them.
    expect(configKeys).toEqual(expect.arrayContaining(declaredEnv('temporal-ui-guard')));
    expect(declaredEnv('temporal-ui-guard')).not.toContain('ADMIN_TOKEN');
    const config = loadUiGuardConfig(envOf('temporal-ui-guard'));
    // The target is the UI container's port (the one its healthcheck asks), by service name.
    const uiPort = /http:\/\/127\.0\.0\.1:(\d+)\/healthz/.exec(argv(service('temporal-ui').healthcheck?.test).join(' '))![1];
    expect(config.UI_GUARD_TARGET).toEqual({ host: 'temporal-ui', port: Number(uiPort) });
    expect(publishedPorts('temporal-ui-guard')[0]!.target).toBe(config.UI_GUARD_PORT);
    expect(config.HOST).toBe('0.0.0.0');
    expect(argv(guard.healthcheck?.test).join(' ')).toContain(`http://127.0.0.1:${config.UI_GUARD_PORT}/healthz`);
    // The browser's origin (the UI's CORS origin) is the guard's published port, on a name its Host check admits.
    const origin = new URL(envOf('temporal-ui').TEMPORAL_CORS_ORIGINS!);
    expect(Number(origin.port)).toBe(publishedPorts('temporal-ui-guard')[0]!.published);
    expect(config.HTTP_ALLOWED_HOSTS).toContain(origin.hostname);
    expect(config.HTTP_ALLOWED_HOSTS).not.toContain('*');
  });

  it('the Web UI is read-only by default (no terminate, cancel, signal or reset) and calls no codec endpoint it cannot authenticate to', () => {
    expect(envOf('temporal-ui').TEMPORAL_DISABLE_WRITE_ACTIONS).toBe('true');
    expect(envOf('temporal-ui', resolve(raw, { ...hostEnv, TEMPORAL_DISABLE_WRITE_ACTIONS: 'false' })).TEMPORAL_DISABLE_WRITE_ACTIONS).toBe('false');
    expect(loadUiGuardConfig(envOf('temporal-ui-guard')).TEMPORAL_UI_WRITE_ACTIONS).toBe(false);
    expect(loadUiGuardConfig(envOf('temporal-ui-guard', resolve(raw, { ...hostEnv, TEMPORAL_UI_WRITE_ACTIONS: 'true' }))).TEMPORAL_UI_WRITE_ACTIONS).toBe(true);
    expect(envOf('temporal-ui').TEMPORAL_CODEC_ENDPOINT).toBeUndefined();
    expect(declaredEnv('temporal-ui')).toEqual(expect.arrayContaining(['TEMPORAL_CODEC_ENDPOINT', 'TEMPORAL_CODEC_PASS_ACCESS_TOKEN']));
  });

  it('gives every long-running service a real healthcheck and a restart policy; one-shot jobs never restart', () => {
    for (const name of longRunning) {
      const check = service(name).healthcheck;
      expect(check?.disable, name).not.toBe(true);
      const test = argv(check?.test);
      expect(['CMD', 'CMD-SHELL'], name).toContain(test[0]);
      expect(test.length, name).toBeGreaterThan(1);
      expect(['unless-stopped', 'always'], name).toContain(service(name).restart);
    }
    for (const name of oneShots) {
      expect(service(name).restart, name).toBe('no');
      expect(service(name).healthcheck, name).toBeUndefined();
    }
  });

  it('pins every image to a version (no latest), Temporal server 1.29 with matching admin tools', () => {
    for (const [name, svc] of Object.entries(services)) {
      expect(svc.image, name).toMatch(/^[^:]+:[^:]+$/);
      expect(svc.image, name).not.toMatch(/:latest$/);
    }
    expect(service('postgres').image).toMatch(/^postgres:16(\b|-)/);
    const server = service('temporal').image!.split(':')[1]!;
    expect(server).toMatch(/^1\.29\.\d+$/);
    for (const job of ['temporal-schema', 'temporal-setup']) {
      expect(service(job).image).toMatch(new RegExp(`^temporalio/admin-tools:${server.replace(/\./g, '\\.')}(-|$)`));
    }
    expect(service('temporal-ui').image).toMatch(/^temporalio\/ui:\d+\.\d+\.\d+$/);
  });

  it('builds the app processes from the Dockerfile, each running its compiled entry file with node', () => {
    const entries: Record<string, string> = {
      migrate: 'dist/db/main.js',
      sandbox: 'dist/sandbox/main.js',
      api: 'dist/api/main.js',
      worker: 'dist/worker/main.js',
      'codec-server': 'dist/lib/codec-server-main.js',
      'temporal-ui-guard': 'dist/lib/ui-guard-main.js',
    };
    for (const [name, entry] of Object.entries(entries)) {
      const svc = service(name);
      expect(svc.build, name).toBeDefined();
      const command = argv(svc.command);
      expect(command.at(-1), name).toBe(entry);
      expect(command[0], name).toBe('node');
      expect(command.join(' '), name).not.toMatch(/\btsx\b/);
      // `npm run build` compiles it from its source.
      const source = entry.replace(/^dist\//, '').replace(/\.js$/, '.ts');
      expect(existsSync(path.join(root, source)), source).toBe(true);
    }
  });

  it('lets the worker scale (no published ports, no fixed container name) and keeps the data in a volume', () => {
    const worker = service('worker');
    expect(worker.ports ?? []).toEqual([]);
    expect(worker.container_name).toBeUndefined();
    expect(service('api').container_name).toBeUndefined();
    expect(worker.deploy?.replicas).toBeGreaterThanOrEqual(1);
    expect(Number.isInteger(worker.deploy?.replicas)).toBe(true);
    const data = (service('postgres').volumes ?? []).map(String).find((v) => v.endsWith(':/var/lib/postgresql/data'));
    expect(data).toBeDefined();
    expect(Object.keys(compose.volumes ?? {})).toContain(data!.split(':')[0]);
  });

  it('mounts only files that exist in the repository', () => {
    for (const [name, svc] of Object.entries(services)) {
      for (const volume of svc.volumes ?? []) {
        const source = typeof volume === 'string' ? volume.split(':')[0]! : (volume.source ?? '');
        if (/^\.{1,2}\//.test(source)) expect(existsSync(path.join(root, source)), `${name}: ${source}`).toBe(true);
      }
    }
  });
});

describe('docker-compose.yml: start-up order', () => {
  it('waits on the right conditions', () => {
    const ready = { postgres: 'service_healthy', migrate: 'service_completed_successfully', 'temporal-setup': 'service_completed_successfully' };
    expect(dependsOn('api')).toEqual(ready);
    expect(dependsOn('worker')).toEqual({ ...ready, sandbox: 'service_healthy', 'sandbox-b': 'service_healthy' });
    expect(dependsOn('temporal-schema')).toEqual({ postgres: 'service_healthy' });
    expect(dependsOn('temporal')).toEqual({ postgres: 'service_healthy', 'temporal-schema': 'service_completed_successfully' });
    expect(dependsOn('temporal-setup')).toEqual({ temporal: 'service_healthy' });
    expect(dependsOn('temporal-ui')).toEqual({ temporal: 'service_healthy' });
    expect(dependsOn('migrate')).toEqual({ postgres: 'service_healthy' });
    expect(dependsOn('sandbox')).toEqual({ postgres: 'service_healthy' });
    expect(dependsOn('sandbox-b')).toEqual({ postgres: 'service_healthy' });
    expect(dependsOn('postgres')).toEqual({});
  });

  it('only waits for health that is checked and for completion of one-shot jobs', () => {
    for (const name of Object.keys(services)) {
      for (const [dep, condition] of Object.entries(dependsOn(name))) {
        expect(services[dep], `${name} -> ${dep}`).toBeDefined();
        expect(['service_healthy', 'service_completed_successfully'], `${name} -> ${dep}`).toContain(condition);
        if (condition === 'service_healthy') expect(service(dep).healthcheck, `${name} -> ${dep}`).toBeDefined();
        if (condition === 'service_completed_successfully') expect(oneShots, `${name} -> ${dep}`).toContain(dep);
      }
    }
  });

  it('has no dependency cycle', () => {
    const order: string[] = [];
    const state = new Map<string, 'visiting' | 'done'>();
    const visit = (name: string, trail: string[]) => {
      if (state.get(name) === 'done') return;
      if (state.get(name) === 'visiting') throw new Error(`dependency cycle: ${[...trail, name].join(' -> ')}`);
      state.set(name, 'visiting');
      for (const dep of Object.keys(dependsOn(name))) visit(dep, [...trail, name]);
      state.set(name, 'done');
      order.push(name);
    };
    for (const name of Object.keys(services)) visit(name, []);
    expect(order).toHaveLength(Object.keys(services).length);
    expect(order.indexOf('postgres')).toBe(0);
    expect(order.indexOf('temporal-setup')).toBeLessThan(order.indexOf('api'));
  });
});

describe('docker-compose.yml: configuration of the app', () => {
  it('reads the config schemas it checks against', () => {
    expect(configKeys).toEqual(expect.arrayContaining(['NODE_ENV', 'DATABASE_URL', 'TEMPORAL_ADDRESS', 'PROVIDER_URL', 'ADMIN_TOKEN']));
    // Every variable is in the parsed config (null when unset).
    expect(Object.keys(loadConfig({ ADMIN_TOKEN: hostEnv.ADMIN_TOKEN })).sort()).toEqual([...configKeys].sort());
    expect(sandboxKeys).toEqual(
      expect.arrayContaining(['DATABASE_URL', 'SANDBOX_FLAKY_FAILURES', 'SANDBOX_HOST', 'SANDBOX_IDEMPOTENCY_KEY_TTL_SECONDS', 'SANDBOX_PORT', 'SANDBOX_SLOW_MS', 'HTTP_ALLOWED_HOSTS']),
    );
  });

  it('sets only variables that lib/config.ts (api, worker, migrate), a PSP kind (provider/kinds.ts) or sandbox/main.ts reads', () => {
    for (const name of orchestratorServices) {
      expect([...configKeys, ...kindSettingVariables()], name).toEqual(expect.arrayContaining(declaredEnv(name)));
    }
    expect(sandboxKeys).toEqual(expect.arrayContaining(declaredEnv('sandbox')));
    expect(sandboxKeys).toEqual(expect.arrayContaining(declaredEnv('sandbox-b')));
  });

  it('refuses to start without ADMIN_TOKEN from the environment, and runs in production mode', () => {
    expect(() => resolve(raw, {})).toThrow(/ADMIN_TOKEN/);
    for (const name of orchestratorServices) {
      expect(envOf(name).NODE_ENV, name).toBe('production');
      expect(envOf(name).ADMIN_TOKEN, name).toBe(hostEnv.ADMIN_TOKEN);
      expect(String(raw.services[name]!.environment && (raw.services[name]!.environment as Record<string, string>).ADMIN_TOKEN)).toMatch(
        /^\$\{ADMIN_TOKEN:\?/,
      );
    }
  });

  it('passes lib/config.ts validation with the values it sets, wired to the compose service names', () => {
    for (const name of orchestratorServices) {
      const env = envOf(name);
      for (const [key, value] of Object.entries(env)) expect(value, `${name} ${key}`).not.toBe('');
      const config = loadConfig(env);
      const db = new URL(config.DATABASE_URL);
      expect([db.protocol, db.hostname, db.port, db.pathname, db.username], name).toEqual(['postgres:', 'postgres', '5432', '/payments', 'payments']);
      expect(config.TEMPORAL_ADDRESS, name).toBe('temporal:7233');
      // PROVIDERS: sandbox-a and sandbox-b, each at its service's name and port.
      expect(
        config.PROVIDERS.map((c) => [c.name, c.kind, c.settings.url]),
        name,
      ).toEqual(Object.entries(sandboxServices).map(([provider, service]) => [provider, 'sandbox', `http://${service}:${envOf(service).SANDBOX_PORT}`]));
      expect(config.TEMPORAL_NAMESPACE, name).toBe(envOf('temporal-setup').TEMPORAL_NAMESPACE);
    }
    // api and worker must agree on the task queue and the namespace.
    expect(envOf('api').TASK_QUEUE).toBe(envOf('worker').TASK_QUEUE);
    expect(loadConfig(envOf('api')).PORT).toBe(publishedPorts('api')[0]!.target);
  });

  it('points each sandbox at its own database and makes it listen where it is published and checked', () => {
    for (const [name, database] of [
      ['sandbox', '/sandbox'],
      ['sandbox-b', '/sandbox_b'],
    ] as const) {
      const env = envOf(name);
      const db = new URL(env.DATABASE_URL!);
      expect([db.hostname, db.port, db.pathname], name).toEqual(['postgres', '5432', database]);
      expect(env.SANDBOX_HOST, name).toBe('0.0.0.0');
      expect(Number(env.SANDBOX_PORT), name).toBe(publishedPorts(name)[0]!.target);
      expect(argv(service(name).healthcheck?.test).join(' '), name).toContain(`http://127.0.0.1:${env.SANDBOX_PORT}/healthz`);
    }
    expect(argv(service('api').healthcheck?.test).join(' ')).toContain(`http://127.0.0.1:${envOf('api').PORT}/readyz`);
  });

  it('uses the same password expression wherever one role connects', () => {
    const rawEnv = (name: string) => raw.services[name]!.environment as Record<string, string>;
    const pg = rawEnv('postgres');
    const password = (url: string) => url.match(/^postgres:\/\/[^:]+:([^@]+)@/)![1];
    for (const name of orchestratorServices) expect(password(rawEnv(name).DATABASE_URL!), name).toBe(pg.PAYMENTS_DB_PASSWORD);
    expect(password(rawEnv('sandbox').DATABASE_URL!)).toBe(pg.SANDBOX_DB_PASSWORD);
    expect(password(rawEnv('sandbox-b').DATABASE_URL!)).toBe(pg.SANDBOX_DB_PASSWORD);
    expect(rawEnv('temporal').POSTGRES_PWD).toBe(pg.TEMPORAL_DB_PASSWORD);
    expect(rawEnv('temporal-schema').SQL_PASSWORD).toBe(pg.TEMPORAL_DB_PASSWORD);
  });

  it('creates the databases the services connect to', () => {
    const init = hostPathOf('postgres', '/docker-entrypoint-initdb.d/10-init-databases.sh');
    expect(init).not.toBeNull();
    const script = readFileSync(init!, 'utf8');
    expect(statSync(init!).mode & 0o111).not.toBe(0);
    expect(script).toMatch(/create_owned_databases payments "\$\{PAYMENTS_DB_PASSWORD\}" payments\n/);
    expect(script).toMatch(/create_owned_databases sandbox "\$\{SANDBOX_DB_PASSWORD\}" sandbox sandbox_b\n/);
    expect(script).toMatch(/create_owned_databases temporal "\$\{TEMPORAL_DB_PASSWORD\}" temporal temporal_visibility\n/);
    const temporal = envOf('temporal');
    expect([temporal.DB, temporal.POSTGRES_SEEDS, temporal.POSTGRES_USER, temporal.DBNAME, temporal.VISIBILITY_DBNAME]).toEqual([
      'postgres12',
      'postgres',
      'temporal',
      'temporal',
      'temporal_visibility',
    ]);
    const schema = envOf('temporal-schema');
    expect([schema.SQL_PLUGIN, schema.SQL_HOST, schema.SQL_USER, schema.DBNAME, schema.VISIBILITY_DBNAME]).toEqual([
      'postgres12',
      'postgres',
      'temporal',
      'temporal',
      'temporal_visibility',
    ]);
    const dynamicConfig = hostPathOf('temporal', envOf('temporal').DYNAMIC_CONFIG_FILE_PATH!);
    expect(dynamicConfig && existsSync(dynamicConfig)).toBe(true);
    expect(parse(readFileSync(dynamicConfig!, 'utf8'))['frontend.enableExecuteMultiOperation']).toEqual([{ value: true }]);
  });
});

describe('docker-compose.yml: Temporal setup', () => {
  const attributes = () => envOf('temporal-setup').SEARCH_ATTRIBUTES!.split(/\s+/).filter(Boolean);

  it('registers exactly TenantId, OrderId and PaymentStatus as Keyword, as the dev server does', () => {
    expect([...attributes()].sort()).toEqual(['OrderId=Keyword', 'PaymentStatus=Keyword', 'TenantId=Keyword']);
    expect([...attributes()].sort()).toEqual([...searchAttributeFlags].sort());
    expect(envOf('temporal-setup').TEMPORAL_ADDRESS).toBe('temporal:7233');
  });

  it('runs scripts that are mounted into the admin-tools containers', () => {
    for (const [name, script] of [
      ['temporal-schema', 'setup-schema.sh'],
      ['temporal-setup', 'setup-namespace.sh'],
    ] as const) {
      const entrypoint = argv(service(name).entrypoint);
      expect(entrypoint[0], name).toBe('/bin/sh');
      expect(path.basename(entrypoint[1]!), name).toBe(script);
      const onHost = hostPathOf(name, entrypoint[1]!);
      expect(onHost && existsSync(onHost), name).toBe(true);
    }
  });

  it('temporal-setup registers the namespace and the attributes on a real server, and is idempotent', async () => {
    const cli = resolveTemporalCli();
    expect(cli, 'the Temporal CLI (the global setup installs it)').not.toBeNull();
    const script = hostPathOf('temporal-setup', argv(service('temporal-setup').entrypoint)[1]!)!;
    const namespace = `compose_${randomBytes(4).toString('hex')}`;
    const address = inject('temporalAddress');
    const env = {
      ...envOf('temporal-setup'),
      TEMPORAL_ADDRESS: address,
      TEMPORAL_NAMESPACE: namespace,
      PATH: `${path.dirname(cli!)}${path.delimiter}${process.env.PATH ?? ''}`,
      // The CLI needs a home for its (optional) config file, as in the image (/home/temporal).
      HOME: process.env.HOME ?? '/tmp',
    };
    const first = await execFileAsync('sh', [script], { env, timeout: 90_000 });
    expect(first.stdout).toContain(`namespace ${namespace} registered`);
    const again = await execFileAsync('sh', [script], { env, timeout: 90_000 });
    expect(again.stdout).toContain(`namespace ${namespace} already registered`);

    const connection = await Connection.connect({ address });
    try {
      const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
      const registered = Object.entries(customAttributes ?? {}).map(([name, type]) => `${name}=${String(type)}`);
      // INDEXED_VALUE_TYPE_KEYWORD = 2
      expect(registered.sort()).toEqual(['OrderId=2', 'PaymentStatus=2', 'TenantId=2']);
    } finally {
      await connection.close();
    }

    // An attribute registered with another type is an error, not a silent success.
    await expect(
      execFileAsync('sh', [script], { env: { ...env, SEARCH_ATTRIBUTES: 'TenantId=Int' }, timeout: 90_000 }),
    ).rejects.toMatchObject({ code: 1 });
  });

  it("the worker healthcheck sees this host's worker polling, and fails when nobody polls", async () => {
    const check = argv(service('worker').healthcheck?.test);
    expect(check.slice(0, 2)).toEqual(['CMD', 'node']);
    const script = path.join(root, check[2]!);
    const address = inject('temporalAddress');
    const taskQueue = `compose-health-${randomBytes(4).toString('hex')}`;
    const env = { ...envOf('worker'), TEMPORAL_ADDRESS: address, TEMPORAL_NAMESPACE: 'default', TASK_QUEUE: taskQueue, PATH: process.env.PATH ?? '' };
    const runCheck = () => execFileAsync(process.execPath, [script], { env, cwd: root, timeout: 30_000 });

    await expect(runCheck()).rejects.toMatchObject({ code: 1 });

    const connection = await NativeConnection.connect({ address });
    const worker = await Worker.create({
      connection,
      namespace: 'default',
      taskQueue,
      workflowBundle: { codePath: inject('workflowBundlePath') },
      activities: { noop: async () => undefined },
    });
    try {
      await worker.runUntil(async () => {
        let last: unknown;
        for (let attempt = 0; attempt < 20; attempt++) {
          try {
            const { stdout } = await runCheck();
            expect(stdout).toContain(`polling default/${taskQueue}`);
            return;
          } catch (error) {
            last = error;
            await new Promise((r) => setTimeout(r, 250));
          }
        }
        throw last;
      });
    } finally {
      await connection.close();
    }
  });
});

describe('Dockerfile and .dockerignore', () => {
  const dockerfile = read('Dockerfile');
  // Instructions, with comments dropped and continuation lines joined.
  const instructions = dockerfile
    .split('\n')
    .filter((line) => !line.trimStart().startsWith('#'))
    .join('\n')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean);

  it('builds on node:20-bookworm-slim and runs the compiled API as an unprivileged user by default', () => {
    const stages = instructions.filter((line) => line.startsWith('FROM '));
    expect(stages.map((line) => line.split(' ')[1])).toEqual(['node:20-bookworm-slim', 'node:20-bookworm-slim']);
    // The final image: production dependencies and the build stage's dist/ only.
    const final = instructions.slice(instructions.lastIndexOf(stages.at(-1)!));
    expect(final.some((line) => /^RUN .*\bnpm ci\b.*--omit=dev/.test(line))).toBe(true);
    expect(final).toContain('COPY --from=build /app/dist dist');
    const user = instructions.filter((line) => line.startsWith('USER ')).at(-1);
    expect(user).toBeDefined();
    expect(user).not.toMatch(/^USER (root|0)\b/);
    const cmd = instructions.filter((line) => line.startsWith('CMD ')).at(-1)!;
    expect(JSON.parse(cmd.slice(4))).toEqual(['node', 'dist/api/main.js']);
    expect(instructions.find((line) => line.startsWith('ENV ') && line.includes('NODE_ENV=production'))).toBeDefined();
  });

  it('runs npm ci with SKIP_TEMPORAL_CLI=1, after copying the lockfile, the postinstall script and the driver patches it applies', () => {
    const ci = instructions.findIndex((line) => line.startsWith('RUN ') && /\bnpm ci\b/.test(line));
    expect(instructions[ci], 'the Dockerfile runs npm ci').toMatch(/^RUN .*\bnpm ci\b/);
    const skipped =
      /\bSKIP_TEMPORAL_CLI=1\b[^&;|]*\bnpm ci\b/.test(instructions[ci]!) ||
      instructions.slice(0, ci).some((line) => /^(ENV|ARG) .*\bSKIP_TEMPORAL_CLI=1\b/.test(line));
    expect(skipped).toBe(true);
    const before = instructions.slice(0, ci).filter((line) => line.startsWith('COPY ')).join('\n');
    expect(before).toContain('package-lock.json');
    expect(before).toContain('scripts/install-temporal.sh');
    // Each stage's npm ci applies patches/ (the PostgreSQL driver's mend): without them the
    // API and the worker refuse to start.
    for (const stage of instructions.filter((line) => line.startsWith('FROM '))) {
      const from = instructions.indexOf(stage);
      const install = instructions.findIndex((line, i) => i > from && line.startsWith('RUN ') && /\bnpm ci\b/.test(line));
      expect(instructions.slice(from, install).some((line) => /^COPY patches\/? patches\/?$/.test(line)), stage).toBe(true);
    }
    expect(read('package.json')).toMatch(/"postinstall": "patch-package --error-on-fail && /);
    expect(read('package.json')).toContain('scripts/install-temporal.sh');
    expect(read('scripts/install-temporal.sh')).toMatch(/SKIP_TEMPORAL_CLI:-\}" = "1"/);
  });

  it('keeps dependencies, local state, tools, test output and git history out of the build context', () => {
    const ignored = read('.dockerignore')
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line && !line.startsWith('#'));
    expect(ignored).toEqual(expect.arrayContaining(['node_modules', '.data', '.tools', 'test/artifacts', '.git', 'dist']));
    // What the containers run must stay in the context.
    for (const needed of ['deploy', 'api', 'worker', 'sandbox', 'db', 'lib', 'scripts', 'patches', 'package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json']) {
      expect(ignored, needed).not.toContain(needed);
    }
  });
});
