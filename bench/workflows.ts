/**
 * Bundle entry of the benchmark's worker: every product workflow (workflows/index.ts) plus
 * the floor workflow, so both run on the same worker, sharing its slots and cache.
 */
export * from '../workflows/index';
export { floorWorkflow } from './floor';
