import { createRequire } from 'node:module';
import type * as AdyenLibrary from '@adyen/api-library';

/**
 * The official Adyen library's values (its classes, its models' enums). The library is CommonJS
 * whose exports Node's ES module loader cannot name (`import { Client } from …` fails in the
 * compiled processes, which run on plain node), so it is loaded by `require`, once; its types
 * are imported as types where they are used.
 */
export const adyen = createRequire(import.meta.url)('@adyen/api-library') as typeof AdyenLibrary;
