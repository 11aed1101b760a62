import { startCheckout } from './server';

/** `PAYMENTS_API_URL=… PAYMENTS_API_KEY=sk_… WEBHOOK_SECRET=whsec_… npx tsx examples/checkout/main.ts` */
const required = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};

const checkout = await startCheckout({
  apiUrl: process.env.PAYMENTS_API_URL ?? 'http://127.0.0.1:3000',
  apiKey: required('PAYMENTS_API_KEY'),
  webhookSecrets: required('WEBHOOK_SECRET').split(' '),
  port: Number(process.env.PORT ?? 4000),
});
console.log(`checkout listening on ${checkout.url}; point the tenant's webhook_url at ${checkout.webhookUrl}`);
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void checkout.close().then(() => process.exit(0)));
