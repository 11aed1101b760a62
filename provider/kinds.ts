/**
 * The kinds of PSP this build can connect to, one line each (provider/<kind>/index.ts). A
 * connection in PROVIDERS names one of these; any other kind stops the process at start.
 */
export { sandbox } from './sandbox';
export { stripe } from './stripe';
export { adyen } from './adyen';
