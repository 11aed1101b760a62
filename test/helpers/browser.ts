/**
 * How browser tests get a browser, driven by playwright-core, never downloaded at test time:
 * - launchBrowser: headless Chromium from the @sparticuz/chromium npm package (its binary and
 *   the few shared libraries it needs travel brotli-compressed in the package); `npm install`
 *   is the whole set-up, no system Chromium, no root.
 * - launchSystemChromium: Debian's `chromium` package at /usr/bin/chromium (the console's test).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { chromium, type Browser, type LaunchOptions } from 'playwright-core';

/** The package's folder (its exports do not include package.json): up from its entry point. */
function packageFolder(): string {
  let dir = path.dirname(createRequire(import.meta.url).resolve('@sparticuz/chromium'));
  while (!existsSync(path.join(dir, 'bin', 'chromium.br'))) {
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error('@sparticuz/chromium has no bin/chromium.br: run npm install');
    dir = parent;
  }
  return dir;
}
const packageDir = packageFolder();
const version = (JSON.parse(readFileSync(path.join(packageDir, 'package.json'), 'utf8')) as { version: string }).version;

/**
 * Unpacked once per package version into the project's own cache (not the shared /tmp the
 * package would pick: another user's or another version's copy there would be used as is).
 */
const unpacked = path.resolve(packageDir, '..', '..', '.cache', `sparticuz-chromium-${version}`);

/**
 * The package unpacks into os.tmpdir(); a child process with TMPDIR pointed at a private
 * folder does it, and a rename publishes the result whole, so parallel test files never run
 * a half-written binary.
 */
function unpack(): void {
  if (existsSync(path.join(unpacked, 'chromium'))) return;
  const staging = `${unpacked}.partial-${process.pid}`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  // AWS_LAMBDA_JS_RUNTIME makes the package also unpack its NSS libraries (al2023/lib), so
  // Chromium needs none from the system.
  const script = `const { default: Chromium } = await import('@sparticuz/chromium'); await Chromium.executablePath();`;
  const result = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: packageDir,
    env: { ...process.env, TMPDIR: staging, AWS_LAMBDA_JS_RUNTIME: 'nodejs20.x' },
    encoding: 'utf8',
    timeout: 120_000,
  });
  if (result.status !== 0 || !existsSync(path.join(staging, 'chromium')) || !existsSync(path.join(staging, 'al2023', 'lib', 'libnss3.so'))) {
    rmSync(staging, { recursive: true, force: true });
    throw new Error(`could not unpack Chromium from @sparticuz/chromium ${version} (run npm install): ${result.stderr || result.error?.message}`);
  }
  try {
    renameSync(staging, unpacked);
  } catch (error) {
    // Another test file published it first: theirs is as good as ours.
    rmSync(staging, { recursive: true, force: true });
    if (!existsSync(path.join(unpacked, 'chromium'))) throw error;
  }
}

/**
 * Flags: the headless shell as root needs --no-sandbox; the rest keep Chromium from calling
 * home, which this machine's closed network refuses, many times per start.
 */
const args = [
  '--no-sandbox',
  '--no-zygote',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-domain-reliability',
];

/**
 * The package's own fonts.conf names Lambda's folders (/tmp/fonts, /var/task/fonts); where
 * none exists Chromium has no font and aborts on the first text it draws (Skia's "Not
 * implemented"). Ours names the fonts it unpacked, wherever the project lives.
 */
function fontConfigFolder(): string {
  const folder = path.join(unpacked, 'fontconfig');
  const file = path.join(folder, 'fonts.conf');
  if (!existsSync(file)) {
    mkdirSync(folder, { recursive: true });
    const conf = [
      '<?xml version="1.0"?>',
      '<!DOCTYPE fontconfig SYSTEM "fonts.dtd">',
      '<fontconfig>',
      `  <dir>${path.join(unpacked, 'fonts', 'fonts')}</dir>`,
      `  <cachedir>${path.join(folder, 'cache')}</cachedir>`,
      '</fontconfig>',
      '',
    ].join('\n');
    writeFileSync(`${file}.${process.pid}`, conf);
    renameSync(`${file}.${process.pid}`, file);
  }
  return folder;
}

/** Headless Chromium for a test; close it in the test's afterAll or finally. */
export async function launchBrowser(options: Pick<LaunchOptions, 'timeout'> = {}): Promise<Browser> {
  unpack();
  const fonts = fontConfigFolder();
  return chromium.launch({
    executablePath: path.join(unpacked, 'chromium'),
    headless: true,
    args,
    // Its shared libraries (NSS) and fonts come from the package, not the system.
    env: {
      ...process.env,
      LD_LIBRARY_PATH: [path.join(unpacked, 'al2023', 'lib'), process.env.LD_LIBRARY_PATH].filter(Boolean).join(':'),
      FONTCONFIG_PATH: fonts,
    },
    ...options,
  });
}

/** Where Debian's `chromium` package puts the browser (`apt-get install -y chromium`; .ci/run installs it). */
export const SYSTEM_CHROMIUM = '/usr/bin/chromium';

/**
 * Headless Chromium from the Debian packages, driven by playwright-core through its
 * executablePath (the console's browser test, docs/console.md). Missing, it fails with how to
 * install it: the test never skips, and nothing is downloaded at test time.
 */
export async function launchSystemChromium(options: Pick<LaunchOptions, 'timeout'> = {}): Promise<Browser> {
  if (!existsSync(SYSTEM_CHROMIUM)) {
    throw new Error(`${SYSTEM_CHROMIUM} is missing: install Debian's Chromium with "apt-get install -y chromium" (.ci/run does)`);
  }
  return chromium.launch({ executablePath: SYSTEM_CHROMIUM, headless: true, args, ...options });
}
