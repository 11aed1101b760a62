import { createRequire } from 'node:module';
import type * as AdyenLibrary from '@adyen/api-library';
import type * as AdyenDisputeModels from '@adyen/api-library/lib/src/typings/disputes/models';

/**
 * The official Adyen library's values (its classes, its models' enums). The library is CommonJS
 * whose exports Node's ES module loader cannot name (`import { Client } from …` fails in the
 * compiled processes, which run on plain node), so it is loaded by `require`, once; its types
 * are imported as types where they are used.
 */
export const adyen = createRequire(import.meta.url)('@adyen/api-library') as typeof AdyenLibrary;

/**
 * The Disputes API's models (its requests and answers), which the library's `Types` does not
 * export: the Adyen double checks the Disputes API's requests with them (doubles/adyen/models.ts).
 */
export const adyenDisputeModels = createRequire(import.meta.url)('@adyen/api-library/lib/src/typings/disputes/models') as typeof AdyenDisputeModels;
