import { randomBytes } from 'node:crypto';
import type { ProviderDouble } from '../kind';

/**
 * Adyen's double (doubles/adyen/): `npm start` runs it as the PSP `adyen-test` under
 * PSP_DOUBLES=adyen, on ADYEN_DOUBLE_PORT, and the chaos run as its third PSP. Its settings
 * (the adyen kind's ADYEN_*) are shared by the double, the API and the worker, so the
 * connection and the double agree on the API key, the merchant account and the HMAC key.
 */
export const adyenDouble: ProviderDouble = {
  name: 'adyen-test',
  script: 'doubles/adyen/main.ts',
  portVariable: 'ADYEN_DOUBLE_PORT',
  defaultPort: 4012,
  webhookUrlVariable: 'ADYEN_DOUBLE_WEBHOOK_URL',
  environment: (url, env) => ({
    ADYEN_API_KEY: env.ADYEN_API_KEY ?? `test_${randomBytes(12).toString('hex')}`,
    ADYEN_MERCHANT_ACCOUNT: env.ADYEN_MERCHANT_ACCOUNT ?? 'OrchestratorTest',
    ADYEN_HMAC_KEY: env.ADYEN_HMAC_KEY ?? randomBytes(32).toString('hex').toUpperCase(),
    // The double serves Adyen's Disputes service under a path of its own URL (DISPUTES_PATH, doubles/adyen/disputes.ts).
    PROVIDER_ADYEN_TEST_DISPUTES_URL: `${url}/ca/services/DisputeService`,
    // Its settlement reports are on its own URL, to a report user of its own.
    ADYEN_REPORT_URL: url,
    ADYEN_REPORT_USERNAME: env.ADYEN_REPORT_USERNAME ?? 'report@Company.OrchestratorTest',
    ADYEN_REPORT_PASSWORD: env.ADYEN_REPORT_PASSWORD ?? randomBytes(12).toString('hex'),
  }),
  describe: (environment) => `the Adyen double, PSP_DOUBLES=adyen; merchant account ${environment.ADYEN_MERCHANT_ACCOUNT}`,
  // Cards it has a test card for (provider/adyen/test-cards.ts); 3-D Secure comes back through our
  // return route (the details call) or not (the AUTHORISATION decides), as Adyen's redirect does.
  chaosMethods: { pm_card_visa: 8, pm_card_declined: 1, pm_card_threeDSecureRequired: 2, pm_card_threeDSecureRequired_declined: 1 },
};
