import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';

/** Colours for the line prefixes, only when the launcher writes to a terminal. */
const colours: Record<string, number> = { start: 1, api: 36, worker: 35, sandbox: 33, postgres: 34, temporal: 32 };
const useColour = process.env.NO_COLOR === undefined && (process.stdout.isTTY || process.env.FORCE_COLOR === '1');

// A closed terminal or a reader that went away must not crash the launcher mid-shutdown.
process.stdout.on('error', () => {});
process.stderr.on('error', () => {});

export function prefix(name: string): string {
  const text = `[${name}]`;
  return useColour ? `\u001b[${colours[name] ?? 37}m${text}\u001b[0m ` : `${text} `;
}

/** Writes each line of a child's output with the child's name in front. */
export function pipeLines(stream: Readable | null, name: string, to: NodeJS.WriteStream): void {
  if (!stream) return;
  const lines = createInterface({ input: stream, crlfDelay: Infinity });
  lines.on('line', (line) => to.write(`${prefix(name)}${line}\n`));
}

/** A log line of the launcher itself. */
export function say(message: string): void {
  for (const line of message.split('\n')) process.stdout.write(`${prefix('start')}${line}\n`);
}

export function complain(message: string): void {
  for (const line of message.split('\n')) process.stderr.write(`${prefix('start')}${line}\n`);
}
