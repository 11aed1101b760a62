/**
 * The benchmark's API process: exactly the product's (api/process.ts). With eager start
 * (BENCH_EAGER_START=on) the worker it hosts gets the bench worker's additions
 * (bench/worker-extras.ts), so the two workers run one bundle and share a Worker Deployment
 * Version; without eager start the additions are unused. Compiled with the product and run as
 * dist/bench/api.js with plain node, as production runs dist/api/main.js.
 */
import { runApiProcess } from '../api/process';
import { benchWorkerExtras } from './worker-extras';

await runApiProcess({ worker: benchWorkerExtras });
