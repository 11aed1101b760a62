import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../devstack/temporal-cli';
import { knownProviderKinds, providerDoubles } from '../../provider/registry';

/**
 * A kind of PSP lives in its own folder (docs/new-psp-kind.md): what it brings is declared in
 * provider/<kind>/ and read by the rest through provider/kinds.ts, so no product file outside
 * its folder (and its double's, doubles/<kind>/) names it, in code or in comments.
 *
 * Scanned: the folders whose files ship or run the product and its tools (the API, the
 * worker's activities and workflows, their layers below, the stand-in PSP, the doubles, the
 * development stack, the scripts, the chaos run, the bench, the test kit, the typed client and
 * the example), every file of code in them (.ts, .tsx, .js, .mjs, .cjs, .sh, .sql, .yaml, .html,
 * .css). Not scanned: test/, whose tests exercise each kind by name (that is their point);
 * docs/ and every Markdown file, written for people, who are told which PSP does what; JSON,
 * the recorded results of bench and chaos runs and the client's package manifest; and the
 * repository's root files (package.json lists each kind's SDK: docs/new-psp-kind.md counts it).
 */
const PRODUCT_FOLDERS = ['api', 'activities', 'db', 'domain', 'lib', 'shared', 'worker', 'workflows', 'provider', 'sandbox', 'doubles', 'devstack', 'scripts', 'chaos', 'bench', 'testkit', 'client', 'examples'];
const CODE = /\.(ts|tsx|js|mjs|cjs|sh|sql|ya?ml|html|css)$/;

/** The file that lists the kinds, one line each: the one place outside its folder that names a kind. */
const KINDS_LIST = 'provider/kinds.ts';

/**
 * Files that name a kind and cannot change: each says why. Applied migrations are checksummed
 * (db/migrate.ts refuses to start on a database whose applied migration was edited), so the
 * comments in them stay as they were written.
 */
const EXCEPTIONS: readonly { file: string; kind: string; why: string }[] = [
  { file: 'db/migrations/022_provider_event_refunds.sql', kind: 'adyen', why: 'an applied migration (checksummed)' },
  { file: 'db/migrations/023_dispute_pre_arbitration.sql', kind: 'adyen', why: 'an applied migration (checksummed)' },
  { file: 'sandbox/migrations/002_idempotency_key_expiry.sql', kind: 'stripe', why: "an applied migration of the sandbox's schema (checksummed)" },
  { file: 'sandbox/migrations/009_card_network.sql', kind: 'stripe', why: "an applied migration of the sandbox's schema (checksummed)" },
];

/**
 * The one kind whose name is also the product's own word, held apart: `sandbox` is the stand-in
 * PSP the development stack, the tools and the test kit are built on (sandbox/, `sandbox-a`,
 * `sandbox-b`), the name of its schema and of its SANDBOX_* configuration keys (recorded names),
 * and the prefix of the control calls every double answers (`/_sandbox/…`, doubles/control.ts).
 * Every other kind, and every new one, is held to its folder.
 */
const OWN_WORDS = ['sandbox'];

/** The words of a text: split at anything but letters and digits and at camelCase humps, lowercased (`ADYEN_API_KEY`, `adyenDouble`, `adyen-test` each hold `adyen`). */
function words(text: string): string[] {
  return text
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((word) => word.toLowerCase());
}

/** Whether a text names the kind: its words (one, or several for a name with '-') stand in a row among the text's. */
function names(text: string, kind: string): boolean {
  const wanted = words(kind);
  const found = words(text);
  return found.some((_, i) => wanted.every((word, j) => found[i + j] === word));
}

function productFiles(): string[] {
  const files: string[] = [];
  for (const folder of PRODUCT_FOLDERS) {
    for (const entry of readdirSync(path.join(projectRoot, folder), { recursive: true, withFileTypes: true })) {
      if (!entry.isFile() || !CODE.test(entry.name)) continue;
      const file = path.relative(projectRoot, path.join(entry.parentPath, entry.name)).split(path.sep).join('/');
      if (!file.split('/').includes('node_modules')) files.push(file);
    }
  }
  return files.sort();
}

const kindFolders = readdirSync(path.join(projectRoot, 'provider'), { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .map((entry) => entry.name)
  .sort();
const files = productFiles();
const text = new Map(files.map((file) => [file, readFileSync(path.join(projectRoot, file), 'utf8')]));

describe('a kind of PSP in its own folder', () => {
  it('every folder under provider/ is a kind the list names, and every kind listed has its folder', () => {
    expect(kindFolders).toEqual([...knownProviderKinds]);
    expect(kindFolders).toEqual(expect.arrayContaining(OWN_WORDS));
    expect(files.length).toBeGreaterThan(300);
  });

  it.each(kindFolders.filter((kind) => !OWN_WORDS.includes(kind)))('no product file outside provider/%s/ and its double names it', (kind) => {
    const home = [`provider/${kind}/`, `doubles/${kind}/`];
    const excepted = new Set(EXCEPTIONS.filter((e) => e.kind === kind).map((e) => e.file));
    const naming = files.filter((file) => !home.some((folder) => file.startsWith(folder)) && file !== KINDS_LIST && !excepted.has(file) && names(text.get(file)!, kind));
    expect(naming).toEqual([]);
  });

  it('the kinds list names each kind once, on its own line; each exception still names its kind', () => {
    const list = text.get(KINDS_LIST)!;
    for (const kind of kindFolders) expect(list.split('\n').filter((line) => names(line, kind)), kind).toEqual([`export { ${kind} } from './${kind}';`]);
    expect(EXCEPTIONS.filter((e) => !names(readFileSync(path.join(projectRoot, e.file), 'utf8'), e.kind))).toEqual([]);
  });

  it("a kind's double is in its own folder, and what PSP_DOUBLES accepts is every kind that declares one", () => {
    for (const [kind, double] of providerDoubles) {
      expect(double.script.startsWith(`doubles/${kind}/`), double.script).toBe(true);
      expect(existsSync(path.join(projectRoot, double.script)), double.script).toBe(true);
      expect(double.name).toBe(`${kind}-test`);
    }
    expect([...providerDoubles.keys()]).toEqual(kindFolders.filter((kind) => existsSync(path.join(projectRoot, 'provider', kind, 'double.ts'))));
  });

  it('the word test catches a kind written any way, and nothing that merely contains it', () => {
    for (const written of ['Adyen’s', 'ADYEN_API_KEY', 'adyenDouble', 'AdyenCensus', 'adyen-test', "'adyen'", 'doubles/adyen/main.ts']) expect(names(written, 'adyen'), written).toBe(true);
    for (const other of ['adyens', 'nonadyen', 'pinstripe', 'striped']) expect(names(other, other.includes('adyen') ? 'adyen' : 'stripe'), other).toBe(false);
    expect(names('the psp-eu connection', 'psp-eu')).toBe(true);
  });
});
