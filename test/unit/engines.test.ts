import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import semver from 'semver';

interface LockedPackage {
  dev?: boolean;
  optional?: boolean;
  engines?: { node?: string } | string[];
}

const manifest = JSON.parse(readFileSync('package.json', 'utf8')) as { engines: { node: string } };
const lock = JSON.parse(readFileSync('package-lock.json', 'utf8')) as { packages: Record<string, LockedPackage> };
/** The oldest Node that package.json's `engines` admits. */
const floor = semver.minVersion(manifest.engines.node)!.version;

/** Every locked package whose own `engines.node` does not admit `version`. */
function refusing(version: string, which: (entry: LockedPackage) => boolean): string[] {
  return Object.entries(lock.packages)
    .filter(([name, entry]) => name !== '' && which(entry))
    .flatMap(([name, entry]) => {
      const range = Array.isArray(entry.engines) ? undefined : entry.engines?.node;
      return range !== undefined && !semver.satisfies(version, range) ? [`${name} (node ${range})`] : [];
    });
}

/** package.json's `engines` is honest: every package the lock installs runs on the oldest Node it admits. */
describe('engines', () => {
  it('admits the Node that runs the suite', () => {
    expect(semver.satisfies(process.versions.node, manifest.engines.node)).toBe(true);
  });

  it('names a floor that every installed package admits, production and development alike', () => {
    expect(refusing(floor, () => true)).toEqual([]);
  });

  it('would refuse a floor below what some package needs (the check can fail)', () => {
    expect(refusing('18.0.0', (entry) => entry.dev === true).length).toBeGreaterThan(0);
  });
});
