/**
 * Preloaded (`node --import`) into the processes `npm start` runs: if the launcher dies
 * without stopping them (kill -9), they notice they were re-parented and shut down the
 * ordinary way, through their own SIGTERM handler, instead of living on as orphans.
 * Plain JavaScript: Node also preloads it into worker threads (the Temporal workflow
 * thread), where the TypeScript loader is not active; it only acts on the main thread.
 */
import { isMainThread } from 'node:worker_threads';

if (isMainThread) {
  const launcher = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === launcher) return;
    clearInterval(timer);
    process.kill(process.pid, 'SIGTERM');
  }, 500);
  timer.unref();
}
