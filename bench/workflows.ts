/**
 * Bundle entry of the benchmark's worker: every product workflow (workflows/index.ts) plus
 * the floor workflows (empty and 3-step), so both run on the same worker, sharing its slots and cache.
 */
export * from '../workflows/index';
export { emptyWorkflow, floorWorkflow } from './floor';
