import { createSql } from './connect';
import { migrate } from './migrate';
import { loadConfig } from '../lib/config';

/** `npm run migrate`: applies pending migrations to DATABASE_URL. */
const config = loadConfig();
const sql = createSql(config.DATABASE_URL, { max: 1 });
const applied = await migrate(sql, (line) => console.log(line));
console.log(applied.length ? `applied ${applied.length} migration(s)` : 'schema up to date');
await sql.end();
