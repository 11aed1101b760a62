import { runApiProcess } from './process';

/**
 * The API process's entry file: everything it runs is wired in api/process.ts. Kept to this one
 * call so the compiled entry (dist/api/main.js), `tsx api/main.ts` and api/primary.ts's
 * processes start the same thing.
 */
await runApiProcess();
