import { z } from 'zod';
import { startAdyenDouble } from './server';

/**
 * The Adyen double as a process (`npm start` runs it as `adyen-test` with PSP_DOUBLES=adyen):
 * loopback only. Its API key, merchant account and HMAC key are the adyen kind's own settings
 * (ADYEN_API_KEY, ADYEN_MERCHANT_ACCOUNT, ADYEN_HMAC_KEY, and its report user's ADYEN_REPORT_USERNAME,
 * ADYEN_REPORT_PASSWORD, ADYEN_REPORT_API_KEY), so the connection and the double agree.
 * It is on the sandboxes' card network with their key (SANDBOX_NETWORK_KEY; unset: the network's
 * development key, as at the sandboxes).
 */
const env = z
  .object({
    ADYEN_DOUBLE_PORT: z.coerce.number().int().min(0).max(65535).default(4012),
    ADYEN_API_KEY: z.string().min(1),
    ADYEN_MERCHANT_ACCOUNT: z.string().min(1),
    ADYEN_HMAC_KEY: z.string().regex(/^[0-9a-fA-F]{32,}$/),
    ADYEN_REPORT_USERNAME: z.string().min(1),
    ADYEN_REPORT_PASSWORD: z.string().min(1),
    ADYEN_REPORT_API_KEY: z.string().min(1).optional(),
    /** Where its notification batches go (loopback); unset: kept, not sent. */
    ADYEN_DOUBLE_WEBHOOK_URL: z.url({ protocol: /^http$/, hostname: /^(127\.0\.0\.1|localhost|\[::1\])$/ }).optional(),
    /** The card network's key (sandbox/network.ts), the one the sandboxes are given. */
    SANDBOX_NETWORK_KEY: z.string().min(16).optional(),
  })
  .parse(process.env);

const double = await startAdyenDouble({
  port: env.ADYEN_DOUBLE_PORT,
  apiKey: env.ADYEN_API_KEY,
  merchantAccount: env.ADYEN_MERCHANT_ACCOUNT,
  hmacKey: env.ADYEN_HMAC_KEY,
  webhookUrl: env.ADYEN_DOUBLE_WEBHOOK_URL ?? null,
  ...(env.SANDBOX_NETWORK_KEY ? { networkKey: env.SANDBOX_NETWORK_KEY } : {}),
  reportUser: { username: env.ADYEN_REPORT_USERNAME, password: env.ADYEN_REPORT_PASSWORD, apiKey: env.ADYEN_REPORT_API_KEY ?? null },
});
process.stdout.write(`adyen double listening on ${double.url}\n`);
const stop = () => void double.close().then(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
