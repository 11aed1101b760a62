/**
 * `npm start`: the whole stack on embedded defaults — Temporal dev server with its Web UI,
 * PostgreSQL (embedded unless DATABASE_URL is set), migrations, the provider sandbox, the
 * worker and the API — and a banner saying where each part is. Ctrl-C stops it all.
 *
 * This file is only the front: it runs devstack/supervisor.ts in a session of its
 * own and relays signals to it. A Ctrl-C in a terminal signals the whole foreground process
 * group at once; without this indirection PostgreSQL and Temporal would be interrupted at the
 * same moment as the worker still draining into them. Here only the supervisor is told,
 * once, and it stops the parts in order: API, worker, sandbox, codec server, frontend balancer,
 * Temporal, PostgreSQL; until then it restarts any child but PostgreSQL that dies (devstack/supervisor.ts).
 * A second Ctrl-C (after a moment) makes it kill whatever is left.
 *
 * Environment (all optional): DATABASE_URL, TEMPORAL_ADDRESS, PORT (3000), SANDBOX_PORT
 * (4010), TEMPORAL_PORT (7233), TEMPORAL_UI_PORT (8233), EMBEDDED_PG_PORT (5433), DATA_DIR
 * (.data), ADMIN_TOKEN, LOG_LEVEL, and the variables of lib/config.ts.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const supervisorPath = fileURLToPath(new URL('../devstack/supervisor.ts', import.meta.url));

const supervisor = spawn(process.execPath, ['--import', import.meta.resolve('tsx'), supervisorPath], {
  // A new session: terminal signals (Ctrl-C, hang-up) reach the supervisor only through us.
  detached: true,
  stdio: ['ignore', 'inherit', 'inherit'],
});

// npm and tsx forward the terminal's Ctrl-C too, so one key press can arrive two or three
// times within milliseconds: those count once. A later one is a second, deliberate Ctrl-C.
let lastRelayed = 0;
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    const now = Date.now();
    if (now - lastRelayed < 1500) return;
    lastRelayed = now;
    supervisor.kill(signal);
  });
}

supervisor.on('error', (error) => {
  console.error(`[start] could not run the supervisor: ${error.message}`);
  process.exit(1);
});
supervisor.on('exit', (code, signal) => {
  if (signal) console.error(`[start] the supervisor was killed by ${signal}; interrupting what it left running`);
  // Normally its process group is empty by now. If it was killed outright, Temporal and
  // PostgreSQL (which share its group) are still running: a SIGINT stops both quickly.
  try {
    process.kill(-supervisor.pid!, 'SIGINT');
  } catch {
    // ESRCH: nothing left
  }
  process.exit(code ?? 1);
});
