/**
 * `npm run build`: what production runs, in dist/, as plain JavaScript (no tsx).
 * 1. tsc compiles the product's folders (tsconfig.build.json).
 * 2. Relative imports get their file extension: the sources import '../db/connect' as the
 *    bundler resolution allows, and Node's ESM loader needs '../db/connect.js'.
 * 3. Files read or loaded at run time beside the code: plain .cjs/.mjs modules, the SQL migrations, and the API reference
 *    page's script copied out of a devDependency (so production installs no front-end toolchain).
 * 4. The workflow bundle (dist/workflow-bundle.js), which production workers load.
 * Arguments name more TypeScript entries compiled beside the product (the benchmark runs its
 * worker and API, bench/worker.ts and bench/api.ts, from dist/ like the product's processes):
 * `tsx scripts/build.ts bench/worker.ts bench/api.ts`.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SCALAR_BUNDLE_FILE, scalarStandalonePath } from '../api/app';
import { projectRoot } from '../devstack/temporal-cli';
import { bundleWorkflows } from '../worker/worker';

const dist = path.join(projectRoot, 'dist');
rmSync(dist, { recursive: true, force: true });

const buildConfig = path.join(projectRoot, 'tsconfig.build.json');
const compiled = (JSON.parse(readFileSync(buildConfig, 'utf8')) as { include: string[] }).include;
const extraEntries = process.argv.slice(2).map((entry) => path.resolve(projectRoot, entry));
let project = buildConfig;
if (extraEntries.length > 0) {
  // The product's configuration with the extra entries included (paths absolute: the file lives outside the project).
  project = path.join(mkdtempSync(path.join(tmpdir(), 'build-')), 'tsconfig.json');
  const include = [...compiled.map((folder) => path.join(projectRoot, folder)), ...extraEntries];
  writeFileSync(project, JSON.stringify({ extends: buildConfig, compilerOptions: { outDir: dist, rootDir: projectRoot, typeRoots: [path.join(projectRoot, 'node_modules', '@types')] }, include }));
}
const tsc = spawnSync(process.execPath, [path.join(projectRoot, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', project], { cwd: projectRoot, stdio: 'inherit' });
if (project !== buildConfig) rmSync(path.dirname(project), { recursive: true, force: true });
if (tsc.status !== 0) process.exit(tsc.status ?? 1);

function* jsFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) yield* jsFiles(full);
    else if (entry.name.endsWith('.js')) yield full;
  }
}

/** '../db/connect' -> '../db/connect.js', '../activities' -> '../activities/index.js'. */
function withExtension(file: string, specifier: string): string {
  if (!specifier.startsWith('./') && !specifier.startsWith('../')) return specifier;
  if (/\.(m?js|json|cjs)$/.test(specifier)) return specifier;
  const target = path.resolve(path.dirname(file), specifier);
  if (existsSync(`${target}.js`)) return `${specifier}.js`;
  if (existsSync(target) && statSync(target).isDirectory() && existsSync(path.join(target, 'index.js'))) return `${specifier}/index.js`;
  throw new Error(`${path.relative(dist, file)}: cannot resolve ${specifier} in the compiled output`);
}

const importPattern = /(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(['"])([^'"]+)\2/g;
for (const file of jsFiles(dist)) {
  const source = readFileSync(file, 'utf8');
  const rewritten = source.replace(importPattern, (_match, lead: string, quote: string, specifier: string) => `${lead}${quote}${withExtension(file, specifier)}${quote}`);
  if (rewritten !== source) writeFileSync(file, rewritten);
}

// Plain JavaScript modules beside the TypeScript (e.g. lib/failure-converter.cjs) are not tsc's to copy.
for (const folder of compiled) {
  for (const entry of readdirSync(path.join(projectRoot, folder), { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !/\.(cjs|mjs)$/.test(entry.name)) continue;
    const source = path.join(entry.parentPath, entry.name);
    cpSync(source, path.join(dist, path.relative(projectRoot, source)));
  }
}

for (const migrations of ['db/migrations', 'sandbox/migrations']) {
  if (existsSync(path.join(projectRoot, migrations))) cpSync(path.join(projectRoot, migrations), path.join(dist, migrations), { recursive: true });
}
cpSync(scalarStandalonePath(), path.join(dist, 'api', SCALAR_BUNDLE_FILE));
writeFileSync(path.join(dist, 'workflow-bundle.js'), await bundleWorkflows());
console.log(`build: ${path.relative(projectRoot, dist)}/ ready (node dist/api/main.js, dist/worker/main.js, dist/db/main.js, dist/sandbox/main.js)`);
