/** The closed set of error types the sandbox answers with, as card PSPs name them. */
export type SandboxErrorType = 'invalid_request_error' | 'idempotency_error' | 'card_error' | 'api_error';

/**
 * An answer other than success, carrying its HTTP status and the `{error:{type, code,
 * message}}` body. Thrown by handlers; the app's error handler renders it, and the
 * idempotency layer stores it when the endpoint had started executing (as card PSPs do).
 */
export class SandboxError extends Error {
  constructor(
    readonly status: 400 | 402 | 404 | 409 | 500 | 503,
    readonly type: SandboxErrorType,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }

  toBody(): { error: { type: SandboxErrorType; code: string; message: string } } {
    return { error: { type: this.type, code: this.code, message: this.message } };
  }
}

export const invalidRequest = (code: string, message: string) =>
  new SandboxError(400, 'invalid_request_error', code, message);

export const notFound = (what: string, id: string) =>
  new SandboxError(404, 'invalid_request_error', 'resource_missing', `No such ${what}: '${id}'`);
