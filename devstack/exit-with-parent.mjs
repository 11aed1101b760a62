/**
 * Preloaded (`node --import`) into child processes that must not outlive whoever started
 * them (`npm start`'s children, the fault suite's workers): once re-parented (their parent
 * died without stopping them), they send themselves EXIT_WITH_PARENT_SIGNAL — SIGTERM by
 * default, i.e. their own graceful shutdown; the fault suite asks for SIGKILL.
 * Plain JavaScript: Node also preloads it into worker threads (the Temporal workflow
 * thread), where the TypeScript loader is not active; it only acts on the main thread.
 */
import { isMainThread } from 'node:worker_threads';

if (isMainThread) {
  const parent = process.ppid;
  const signal = process.env.EXIT_WITH_PARENT_SIGNAL || 'SIGTERM';
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    process.kill(process.pid, signal);
  }, 500);
  timer.unref();
}
