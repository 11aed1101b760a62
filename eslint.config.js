// Lint: the rules that protect correctness, not style.
import tseslint from 'typescript-eslint';

/** What workflow code must never import: I/O, clocks and randomness live in activities. */
const bannedInWorkflows = [
  { group: ['node:*', 'fs', 'fs/*', 'path', 'crypto', 'http', 'https', 'net', 'child_process', 'os', 'worker_threads'], message: 'Workflows are deterministic: no Node I/O. Do it in an activity.' },
  { group: ['postgres', 'hono', '@hono/*', 'pino', 'prom-client', 'standardwebhooks', 'stripe'], message: 'Workflows do no I/O: call an activity.' },
  { group: ['@temporalio/client', '@temporalio/worker', '@temporalio/activity'], message: 'Workflow code imports only @temporalio/workflow and @temporalio/common.', allowTypeImports: true },
  { group: ['../activities', '../activities/*', '../db/*', '../api/*', '../worker/*', '../provider/sandbox-client', '../provider/stripe', '../lib/*', '../domain/*', '!../domain/payment-lifecycle'], message: 'Workflows import activities by type only (import type), and shared definitions from shared/.', allowTypeImports: true },
];

/** The house's layers: production code never reaches into the development stack, scripts or tests, and lib/ (shared by every process) never into a process. */
const devOnly = { group: ['**/devstack/*', '**/scripts/*', '**/test/*', '**/testkit/*', '**/bench/*', '**/chaos/*'], message: 'Production code does not import the development stack, scripts, tests, their kit, the bench or the chaos run.' };
const processes = { group: ['**/api/*', '**/worker/*', '**/sandbox/*', '**/activities/*', '**/workflows/*'], message: 'lib/ and db/ serve every process: they import none of them.' };
/**
 * Activities are the steps the worker runs: they never reach back up into the worker process
 * (fault points live in lib/kill-points.ts; the periodic jobs' passes are activities).
 */
const workerProcess = { group: ['**/worker/*'], message: 'Activities do not import the worker process: what they share with it lives in lib/ (kill points: lib/kill-points.ts) or is injected.' };

export default tseslint.config(
  { ignores: ['node_modules/**', '.data/**', '.tools/**', 'dist/**', 'test/artifacts/**', 'bench/results/**'] },
  {
    files: ['**/*.ts'],
    languageOptions: { parser: tseslint.parser, parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    plugins: { '@typescript-eslint': tseslint.plugin },
    rules: {
      // A promise nobody awaits hides failures (and in a workflow, nondeterminism).
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
    },
  },
  {
    // domain/payment-lifecycle.ts is the lifecycle table workflows derive their guards from: held to the same rules.
    files: ['workflows/**/*.ts', 'shared/**/*.ts', 'domain/payment-lifecycle.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', { patterns: bannedInWorkflows }],
      'no-restricted-globals': ['error', { name: 'process', message: 'Configuration enters workflows as input.' }, { name: 'setTimeout', message: 'Use sleep() or condition() from @temporalio/workflow.' }, { name: 'fetch', message: 'Workflows do no I/O.' }],
      'no-restricted-properties': ['error', { object: 'Math', property: 'random', message: 'Use uuid4() or a seeded value from the workflow API.' }],
    },
  },
  {
    files: ['api/**/*.ts', 'worker/**/*.ts', 'domain/**/*.ts', 'provider/**/*.ts', 'sandbox/**/*.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: [devOnly] }] },
  },
  {
    files: ['activities/**/*.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: [devOnly, workerProcess] }] },
  },
  {
    // Handlers are typed from their route definitions (api/typed-route.ts): a cast to never would switch that check off.
    files: ['api/**/*.ts'],
    rules: { 'no-restricted-syntax': ['error', { selector: 'TSAsExpression > TSNeverKeyword', message: 'No `as never` at the edge: type the handler from its route (AppRouteHandler, runIdempotent(c, deps, route, …)).' }] },
  },
  {
    files: ['lib/**/*.ts', 'db/**/*.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: [devOnly, processes] }] },
  },
);
