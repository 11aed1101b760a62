import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * docs/ARCHITECTURE.md: db/ holds the product's SQL; only the stand-in PSPs (sandbox/) keep their
 * own. A query written anywhere else in what the api and worker run (a tagged template on a
 * postgres.js client: `sql`, `tx`, `db`) is reported with its file and line.
 */

const root = path.resolve(import.meta.dirname, '..', '..');
const productFolders = ['activities', 'api', 'domain', 'lib', 'provider', 'shared', 'worker', 'workflows'];
const query = /\b(?:sql|tx|db)(?:<[^`;]*?>)?`/;

function sources(folder: string): string[] {
  return readdirSync(path.join(root, folder), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && /\.tsx?$/.test(entry.name))
    .map((entry) => path.relative(root, path.join(entry.parentPath, entry.name)));
}

function queriesIn(files: readonly string[]): string[] {
  return files.flatMap((file) =>
    readFileSync(path.join(root, file), 'utf8')
      .split('\n')
      .flatMap((line, i) => (query.test(line) && !/^\s*(\/\/|\*)/.test(line) ? [`${file}:${i + 1}`] : [])),
  );
}

describe('where the SQL is', () => {
  it('no query outside db/ in what the api and worker run', () => {
    expect(queriesIn(productFolders.flatMap(sources))).toEqual([]);
  });

  it('the check sees a query where there is one (db/ has them)', () => {
    expect(queriesIn(sources('db')).length).toBeGreaterThan(20);
  });
});
