// Lint: the rules that protect correctness, not style.
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import tseslint from 'typescript-eslint';

/**
 * What workflow code must never import: I/O, clocks and randomness live in activities. `up` is
 * the way from the file's folder to the project's root ('../' in workflows/, '../../' in a folder
 * of it such as workflows/payments/), so a file one folder down is held to the same rules.
 */
const bannedInWorkflowsAt = (up) => [
  { group: ['node:*', 'fs', 'fs/*', 'path', 'crypto', 'http', 'https', 'net', 'child_process', 'os', 'worker_threads'], message: 'Workflows are deterministic: no Node I/O. Do it in an activity.' },
  { group: ['postgres', 'hono', '@hono/*', 'pino', 'prom-client', 'standardwebhooks', 'stripe'], message: 'Workflows do no I/O: call an activity.' },
  { group: ['@temporalio/client', '@temporalio/worker', '@temporalio/activity'], message: 'Workflow code imports only @temporalio/workflow and @temporalio/common.', allowTypeImports: true },
  {
    group: ['activities', 'activities/*', 'db/*', 'api/*', 'worker/*', 'provider/sandbox', 'provider/sandbox/*', 'provider/stripe', 'provider/stripe/*', 'provider/registry', 'provider/kinds', 'lib/*', 'domain/*', '!domain/payments', '!domain/recovery'].map((p) => (p.startsWith('!') ? `!${up}${p.slice(1)}` : `${up}${p}`)),
    message: 'Workflows import activities by type only (import type), and shared definitions from shared/.',
    allowTypeImports: true,
  },
];
const bannedInWorkflows = bannedInWorkflowsAt('../');

/**
 * The house's layers, from the ground up. A folder imports from itself and from the folders
 * below it, never from one above: no import runs upward, and no two folders can import each
 * other in a circle. The ground holds the business rules and the lifecycle table (domain/);
 * on it what the API, the worker and the workflows share (shared/); then what every process
 * shares (lib/, db/; the PSP clients below them, which need neither), the sandbox, the steps and the workflows, the processes,
 * the typed client, and last the development stack, its kit, the bench, the chaos run, the
 * scripts, the examples and the tests, which nothing in production imports.
 */
const layers = ['domain', 'shared', 'provider', 'lib', 'db', 'sandbox', 'doubles', 'activities', 'workflows', 'worker', 'api', 'client', 'devstack', 'testkit', 'bench', 'chaos', 'scripts', 'examples', 'test'];

/** The pattern that keeps `folder` under the layers above it (a relative import that climbs out of it and into one of them). */
function layerPattern(folder) {
  const above = layers.slice(layers.indexOf(folder) + 1);
  const below = layers.slice(0, layers.indexOf(folder));
  return {
    regex: `^(\\.\\./)+(${above.join('|')})(/|$)`,
    message: `Layers (eslint.config.js): ${folder}/ ${below.length ? `imports only from ${below.map((f) => `${f}/`).join(', ')}` : 'is the ground: it imports nothing of the project'}; what both sides need moves down.`,
  };
}

/**
 * No import circle between files: an import that leads back, through any chain of the
 * project's relative imports, to the file that makes it is refused (type-only imports too).
 * Each file's imports are read once per lint run with TypeScript's pre-processor.
 */
const importsOf = new Map();
function projectImports(file) {
  let found = importsOf.get(file);
  if (found) return found;
  found = [];
  importsOf.set(file, found);
  let text;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    return found;
  }
  for (const { fileName } of ts.preProcessFile(text, true, true).importedFiles) {
    const target = resolveRelative(file, fileName);
    if (target) found.push({ specifier: fileName, target });
  }
  return found;
}
function resolveRelative(from, specifier) {
  if (!specifier.startsWith('.')) return null;
  const base = path.resolve(path.dirname(from), specifier);
  for (const candidate of [base, `${base}.ts`, `${base}.tsx`, path.join(base, 'index.ts'), base.replace(/\.js$/, '.ts')]) {
    if (candidate.includes(`${path.sep}node_modules${path.sep}`)) return null;
    if (/\.(ts|tsx|mts|cts)$/.test(candidate) && fs.existsSync(candidate) && fs.statSync(candidate).isFile()) return candidate;
  }
  return null;
}
/** The chain of files from `start` back to `goal`, or null. */
function chainBack(start, goal) {
  const cameFrom = new Map([[start, null]]);
  const queue = [start];
  while (queue.length > 0) {
    const file = queue.shift();
    for (const { target } of projectImports(file)) {
      if (target === goal) {
        const chain = [goal, file];
        for (let at = cameFrom.get(file); at; at = cameFrom.get(at)) chain.push(at);
        return chain.reverse();
      }
      if (!cameFrom.has(target)) {
        cameFrom.set(target, file);
        queue.push(target);
      }
    }
  }
  return null;
}
const noImportCycle = {
  meta: { type: 'problem', schema: [], messages: { cycle: 'Import circle: {{chain}}. Move what both sides need into a module they both import.' } },
  create(context) {
    const file = context.filename;
    const check = (node) => {
      if (!node.source || typeof node.source.value !== 'string') return;
      const target = resolveRelative(file, node.source.value);
      if (!target) return;
      const chain = target === file ? [file] : chainBack(target, file);
      if (chain) context.report({ node: node.source, messageId: 'cycle', data: { chain: [file, ...chain].map((f) => path.relative(import.meta.dirname, f)).join(' → ') } });
    };
    return { ImportDeclaration: check, ExportNamedDeclaration: check, ExportAllDeclaration: check, ImportExpression: check };
  },
};

export default tseslint.config(
  { ignores: ['node_modules/**', '.data/**', '.tools/**', 'dist/**', 'test/artifacts/**', 'bench/results/**'] },
  {
    files: ['**/*.ts', '**/*.tsx'],
    languageOptions: { parser: tseslint.parser, parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    plugins: { '@typescript-eslint': tseslint.plugin },
    rules: {
      // A promise nobody awaits hides failures (and in a workflow, nondeterminism).
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
    },
  },
  {
    files: ['**/*.ts', '**/*.tsx'],
    plugins: { layers: { rules: { 'no-import-cycle': noImportCycle } } },
    rules: { 'layers/no-import-cycle': 'error' },
  },
  // Each folder's layer; workflow code (and what it imports: shared/, the lifecycle table) also stays deterministic.
  ...layers.map((folder) => ({
    files: [`${folder}/**/*.ts`, `${folder}/**/*.tsx`],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: folder === 'workflows' || folder === 'shared' ? [layerPattern(folder), ...bannedInWorkflows] : [layerPattern(folder)] }] },
  })),
  {
    // A folder inside workflows/ (the payment run's phases): the same bans, one folder further down.
    files: ['workflows/*/**/*.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: [layerPattern('workflows'), ...bannedInWorkflowsAt('../../')] }] },
  },
  {
    // domain/payments.ts is the lifecycle table workflows derive their guards from, domain/recovery.ts
    // the recovery policy the payment's run decides its retries by: both held to the same rules.
    files: ['workflows/**/*.ts', 'shared/**/*.ts', 'domain/payments.ts', 'domain/recovery.ts'],
    rules: {
      'no-restricted-globals': ['error', { name: 'process', message: 'Configuration enters workflows as input.' }, { name: 'setTimeout', message: 'Use sleep() or condition() from @temporalio/workflow.' }, { name: 'fetch', message: 'Workflows do no I/O.' }],
      'no-restricted-properties': ['error', { object: 'Math', property: 'random', message: 'Use uuid4() or a seeded value from the workflow API.' }],
    },
  },
  {
    files: ['domain/payments.ts', 'domain/recovery.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: [layerPattern('domain'), ...bannedInWorkflows] }] },
  },
  {
    // A workflow's phases stay short enough to read whole: a file a concern, a function a step.
    files: ['workflows/**/*.ts'],
    rules: {
      'max-lines': ['error', { max: 300, skipBlankLines: true, skipComments: true }],
      'max-lines-per-function': ['error', { max: 60, skipBlankLines: true, skipComments: true }],
    },
  },
  {
    // Handlers are typed from their route definitions (api/typed-route.ts): a cast to never would switch that check off.
    files: ['api/**/*.ts', 'api/**/*.tsx'],
    rules: { 'no-restricted-syntax': ['error', { selector: 'TSAsExpression > TSNeverKeyword', message: 'No `as never` at the edge: type the handler from its route (AppRouteHandler, runIdempotent(c, deps, route, …)).' }] },
  },
  {
    // Routes are thin: a handler validates, hands the operation to the protocol or a step, and answers. What is longer is a named step of its own.
    files: ['api/**/*.ts', 'api/**/*.tsx'],
    rules: { 'max-lines-per-function': ['error', { max: 60 }] },
  },
);
