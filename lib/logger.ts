import pino from 'pino';

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

/**
 * A request's logger: its request id and, once authenticated, its tenant are bound to every
 * line. Why not a pino child per request: two child loggers (request, then tenant) were built
 * for every request though most requests log one line, the request line, which `line` writes
 * with the bindings merged in; the child is built only when something else logs.
 */
export class RequestLogger {
  private child: Logger | undefined;
  private readonly bindings: { request_id: string; tenant_id?: string };

  constructor(
    private readonly root: Logger,
    requestId: string,
  ) {
    this.bindings = { request_id: requestId };
  }

  bindTenant(tenantId: string): void {
    this.bindings.tenant_id = tenantId;
    this.child = undefined;
  }

  private get logger(): Logger {
    return (this.child ??= this.root.child({ ...this.bindings }));
  }

  /** The request's one line at info: bindings and fields in one object, no child. */
  line(fields: object, msg: string): void {
    if (this.root.isLevelEnabled('info')) this.root.info({ ...this.bindings, ...fields }, msg);
  }

  info(fields: object, msg: string): void {
    this.logger.info(fields, msg);
  }

  warn(fields: object, msg: string): void {
    this.logger.warn(fields, msg);
  }

  error(fields: object, msg: string): void {
    this.logger.error(fields, msg);
  }
}
