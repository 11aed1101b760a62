import { existsSync, readdirSync, readFileSync } from 'node:fs';
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

/**
 * docs/ARCHITECTURE.md's map: its layers are the lint table's, in its order (eslint.config.js
 * `layers`), and the areas table names every file of an area, each one that exists.
 */
describe('docs/ARCHITECTURE.md', () => {
  const page = readFileSync(path.join(projectRoot, 'docs', 'ARCHITECTURE.md'), 'utf8');

  it('lists the layers in the order of the lint table', () => {
    const lint = readFileSync(path.join(projectRoot, 'eslint.config.js'), 'utf8');
    const layers = JSON.parse(/const layers = (\[[^\]]*\]);/.exec(lint)![1]!.replace(/'/g, '"')) as string[];
    const documented = /From the ground up: ([^.]*)\./.exec(page)![1]!.match(/`([\w-]+)\/`/g)!.map((f) => f.slice(1, -2));
    expect(layers.length).toBeGreaterThan(10);
    expect(documented).toEqual(layers);
  });

  it('names, for each area, every file in a role folder that carries its name, and only files that exist', () => {
    const areas = page.slice(page.indexOf('## The areas'), page.indexOf('## The parts'));
    const named = new Set([...areas.matchAll(/`((?:[\w-]+\/)+[\w.-]+\.ts)`/g)].map((m) => m[1]!));
    expect([...named].filter((file) => !existsSync(path.join(projectRoot, file)))).toEqual([]);
    const roleFolders = ['domain', 'shared', 'db', 'activities', 'workflows', 'api/routes'];
    const areaNames = ['payments', 'refunds', 'disputes', 'customers', 'routing', 'recovery', 'reconciliation'];
    const carrying = roleFolders.flatMap((folder) =>
      readdirSync(path.join(projectRoot, folder))
        .filter((file) => areaNames.some((area) => file === `${area}.ts` || file.startsWith(`${area}-`)))
        .map((file) => `${folder}/${file}`),
    );
    expect(carrying.length).toBeGreaterThan(25);
    expect(carrying.filter((file) => !named.has(file))).toEqual([]);
  });
});
