export { freePort } from '../../lib/ports';
