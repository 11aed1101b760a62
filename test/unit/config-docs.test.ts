import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configVariables } from '../../lib/config';
import { projectRoot } from '../../devstack/temporal-cli';

/** docs/operating.md is the reference of every setting: a variable the configuration reads and the page does not name fails here. */
describe('docs/operating.md', () => {
  it('names every variable lib/config.ts reads', () => {
    const page = readFileSync(path.join(projectRoot, 'docs', 'operating.md'), 'utf8');
    expect(configVariables.length).toBeGreaterThan(50);
    expect(configVariables.filter((name) => !new RegExp(`\\b${name}\\b`).test(page))).toEqual([]);
  });
});
