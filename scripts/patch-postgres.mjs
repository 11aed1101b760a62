// Run by `npm install` (package.json postinstall), before anything starts: mends a defect of
// postgres.js 3.4.9 (the newest release) that ends the whole process when PostgreSQL drops a
// connection in the middle of a transaction (a restart, an outage, pg_terminate_backend).
//
// The defect (porsager/postgres issues 1066, 1154 and 1208; fixes proposed, none released):
// the driver sends small writes from a setImmediate. When the connection closes, it sets its
// socket to null; the transaction's own ROLLBACK, written after that, schedules a write that
// then reads `socket.write` of null inside the immediate, where no caller can catch it: an
// uncaught TypeError, and the API or worker process exits. The close also leaves the pending
// write's timer and bytes behind, so the connection's next startup message could be held
// back or sent after stale bytes, and the terminated backend's error fails the next query.
//
// The mend, in both builds of the driver (src/ for ESM, cjs/src/ for require): a write that
// finds no socket fails the connection's queries with CONNECTION_CLOSED (which every caller
// already handles as "database unavailable") instead of throwing; a close or termination
// forgets the pending write (and a close, the lost query's error, which would otherwise fail
// the next query). test/integration/postgres-driver.test.ts reproduces the crash
// with a real backend killed under a transaction.
//
// Written here rather than with a patching tool: three anchored insertions do not justify a
// production dependency tree, and the script refuses (exit 1) if the driver is not the version
// and text it was written for, so an upgrade is checked by hand, never patched blindly.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const patchedVersion = '3.4.9';
const marker = 'payment-orchestrator: scripts/patch-postgres.mjs';

/** Each insertion: the exact driver text it follows, and what goes right after it. */
const insertions = [
  {
    what: 'a write that finds the socket closed fails the queries instead of throwing',
    after: '  function nextWrite(fn) {\n',
    insert:
      `    if (socket === null) { // ${marker}\n` +
      '      chunk = nextWriteTimer = null\n' +
      "      error(Errors.connection('CONNECTION_CLOSED', options))\n" +
      '      return false\n' +
      '    }\n',
  },
  {
    what: 'a terminated connection forgets its pending write',
    after: '    clearImmediate(nextWriteTimer)\n    if (socket) {\n',
    before: '    if (socket) {\n',
    insert: `    chunk = nextWriteTimer = null // ${marker}\n`,
  },
  {
    // The error PostgreSQL sent before it closed (57P01 when the backend was terminated) belonged
    // to a query the close already failed: kept, it would fail the next query on a new socket.
    what: 'a closed connection forgets its pending write and the error of the query it lost',
    after: '    clearImmediate(nextWriteTimer)\n    socket.removeListener(\'data\', data)\n',
    before: "    socket.removeListener('data', data)\n",
    insert: `    chunk = nextWriteTimer = errorResponse = null // ${marker}\n`,
  },
];

/** The driver's connection.js with the mend applied; the same text if it already is; throws if the text is not the expected one. */
export function patchConnectionSource(source) {
  if (source.includes(marker)) return source;
  let patched = source;
  for (const { what, after, before, insert } of insertions) {
    const at = patched.indexOf(after);
    if (at === -1 || patched.indexOf(after, at + 1) !== -1) throw new Error(`postgres.js connection.js: no single place for "${what}"`);
    // Insert before `before` when given (the anchor's tail), else right after the anchor.
    const position = before ? at + after.length - before.length : at + after.length;
    patched = patched.slice(0, position) + insert + patched.slice(position);
  }
  return patched;
}

/** Patches the installed driver (both builds); returns the files changed. */
export function patchInstalledDriver(fromDirectory) {
  // A direct dependency: npm installs it at the top of node_modules.
  const root = path.join(fromDirectory, 'node_modules', 'postgres');
  const { version } = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
  if (version !== patchedVersion) {
    throw new Error(
      `postgres.js is ${version}, the mend was written for ${patchedVersion}: check whether this version still crashes ` +
        '(npx vitest run test/integration/postgres-driver.test.ts) and update or remove scripts/patch-postgres.mjs',
    );
  }
  const changed = [];
  for (const file of ['src/connection.js', 'cjs/src/connection.js']) {
    const full = path.join(root, file);
    const source = readFileSync(full, 'utf8');
    const patched = patchConnectionSource(source);
    if (patched !== source) {
      writeFileSync(full, patched);
      changed.push(file);
    }
  }
  return changed;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    const changed = patchInstalledDriver(path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..'));
    console.log(changed.length ? `postgres.js ${patchedVersion}: mended ${changed.join(', ')} (scripts/patch-postgres.mjs)` : `postgres.js ${patchedVersion}: already mended`);
  } catch (error) {
    console.error(`scripts/patch-postgres.mjs: ${error.message}`);
    process.exit(1);
  }
}
