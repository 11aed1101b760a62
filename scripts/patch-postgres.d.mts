// Types of scripts/patch-postgres.mjs (a plain ES module: npm install runs it before tsx exists).
export declare const patchedVersion: string;
export declare function patchConnectionSource(source: string): string;
export declare function patchInstalledDriver(fromDirectory: string): string[];
