import pino from 'pino';
import { activeTraceIds } from './tracing';

export type Logger = pino.Logger;

/**
 * Structured JSON logs. Secrets never reach the output: API keys, webhook secrets and card
 * tokens are redacted wherever they appear under these names.
 */
export function createLogger(options: { level?: string; name: string; destination?: pino.DestinationStream }): Logger {
  return pino(
    {
      name: options.name,
      level: options.level ?? 'info',
      base: { service: options.name },
      // A line written inside a sampled span leads to its trace (lib/tracing.ts).
      mixin: activeTraceIds,
      redact: {
        paths: [
          'authorization',
          '*.authorization',
          'headers.authorization',
          '*.headers.authorization',
          'api_key',
          '*.api_key',
          'apiKey',
          '*.apiKey',
          'webhook_secret',
          '*.webhook_secret',
          'webhookSecret',
          '*.webhookSecret',
          'payment_method',
          '*.payment_method',
          'paymentMethod',
          '*.paymentMethod',
        ],
        censor: '[redacted]',
      },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    options.destination,
  );
}
