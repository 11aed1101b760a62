import http from 'node:http';
import https from 'node:https';
import {
  ProviderRejectedError,
  ProviderUnavailableError,
  type CallOptions,
  type ProviderBalanceTransaction,
  type ProviderWebhookEvent,
  type CaptureChargeRequest,
  type CreateChargeRequest,
  type CreateRefundRequest,
  type PaymentProvider,
  type DisputeProvider,
  type ProviderCharge,
  type ProviderDispute,
  type ProviderRefund,
  type VoidChargeRequest,
} from '../types';
import { verifySandboxWebhook } from './webhook';
import {
  toBalanceTransaction,
  toCharge,
  toDispute,
  toRefund,
  type BalanceTransactionJson,
  type ChargeJson,
  type DisputeJson,
  type ErrorJson,
  type ListJson,
  type RefundJson,
} from './wire';

export interface SandboxProviderConfig {
  baseUrl: string;
  /**
   * Per HTTP call. Past it the outcome is unknown: the call is aborted and reported as
   * ProviderUnavailableError, so the caller looks the operation up before retrying.
   */
  timeoutMs: number;
  /** The secret the sandbox signs its webhooks with (SANDBOX_WEBHOOK_SECRET); verifyWebhook refuses everything without it. */
  webhookSecret?: string | null;
  /** How old (or how far ahead) a signature's timestamp may be, in seconds (default 300, as card PSPs allow). */
  webhookToleranceSeconds?: number;
}

/** What the charge is made with: the payment method, the saved card's token here, or the card network's transaction id and the card. */
function chargedMethod(request: CreateChargeRequest): Record<string, unknown> {
  const saved = request.savedMethod;
  if (!saved) return { payment_method: request.paymentMethod };
  if (saved.token !== null) return { payment_method: saved.token };
  const { card } = saved;
  return { network_transaction_id: saved.networkTransactionId, card: { brand: card.brand, last4: card.last4, exp_month: card.expMonth, exp_year: card.expYear } };
}

/** The orchestrator's client for the provider sandbox (sandbox/). */
export class SandboxProvider implements PaymentProvider {
  readonly kind = 'sandbox';
  private readonly baseUrl: URL;
  private readonly prefix: string;
  private readonly timeoutMs: number;
  private readonly webhookSecret: string | null;
  private readonly webhookToleranceSeconds: number;
  /**
   * Why node:http and not fetch: fetch (undici) costs the worker noticeably more CPU per call
   * (web streams, Headers, Response); the provider call is on every payment's path. Keep-alive,
   * and idle sockets close when the server's Keep-Alive hint says so (Node's agent honours it),
   * so a reused socket is not one the server is about to drop.
   */
  private readonly agent: http.Agent;
  private readonly transport: typeof http | typeof https;

  constructor(config: SandboxProviderConfig) {
    this.baseUrl = new URL(config.baseUrl);
    this.prefix = this.baseUrl.pathname.replace(/\/+$/, '');
    this.timeoutMs = config.timeoutMs;
    this.webhookSecret = config.webhookSecret ?? null;
    this.webhookToleranceSeconds = config.webhookToleranceSeconds ?? 300;
    this.transport = this.baseUrl.protocol === 'https:' ? https : http;
    this.agent = new this.transport.Agent({ keepAlive: true, maxSockets: 256 });
  }

  /** Closes idle keep-alive sockets (calls in flight finish). */
  close(): void {
    this.agent.destroy();
  }

  /** One request and its whole body; rejects on network errors and on abort. */
  private exchange(method: string, path: string, headers: Record<string, string | number>, body: string | undefined, signal: AbortSignal): Promise<{ status: number; text: string; statusText: string }> {
    return new Promise((resolve, reject) => {
      const request = this.transport.request(
        {
          protocol: this.baseUrl.protocol,
          hostname: this.baseUrl.hostname,
          port: this.baseUrl.port,
          path: `${this.prefix}${path}`,
          method,
          headers,
          agent: this.agent,
          signal,
        },
        (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('end', () => resolve({ status: response.statusCode ?? 0, statusText: response.statusMessage ?? '', text: Buffer.concat(chunks).toString('utf8') }));
          // A body cut short (the connection dropped, or the signal aborted mid-body) is a lost response.
          response.on('aborted', () => reject(new Error('response aborted')));
          response.on('error', reject);
        },
      );
      request.on('error', reject);
      request.end(body);
    });
  }

  async createCharge(request: CreateChargeRequest, options?: CallOptions): Promise<ProviderCharge> {
    const { status, body } = await this.call(
      'POST',
      '/v1/charges',
      {
        amount_minor: request.amountMinor,
        currency: request.currency,
        ...chargedMethod(request),
        capture: request.capture,
        reference: request.reference,
        ...(request.description != null ? { description: request.description } : {}),
        ...(request.returnUrl != null ? { return_url: request.returnUrl } : {}),
        ...(request.offSession ? { off_session: true } : {}),
        ...(request.setupFutureUsage ? { setup_future_usage: request.setupFutureUsage } : {}),
      },
      request.idempotencyKey,
      options,
    );
    // A decline is an answer about the card, not a failure of the call.
    if (status === 402) {
      const declined = (body as ErrorJson).error?.charge;
      if (!declined) throw new ProviderUnavailableError('sandbox answered 402 without the declined charge', status);
      return toCharge(declined);
    }
    return toCharge(body as ChargeJson);
  }

  async findChargeByIdempotencyKey(idempotencyKey: string, options?: CallOptions): Promise<ProviderCharge | null> {
    const query = new URLSearchParams({ idempotency_key: idempotencyKey });
    const { body } = await this.call('GET', `/v1/charges?${query}`, undefined, undefined, options);
    const [charge] = (body as ListJson<ChargeJson>).data;
    return charge ? toCharge(charge) : null;
  }

  async listChargesByReference(reference: string, options?: CallOptions): Promise<ProviderCharge[]> {
    const query = new URLSearchParams({ reference });
    const { body } = await this.call('GET', `/v1/charges?${query}`, undefined, undefined, options);
    return (body as ListJson<ChargeJson>).data.map(toCharge);
  }

  async captureCharge(request: CaptureChargeRequest, options?: CallOptions): Promise<ProviderCharge> {
    const { body } = await this.call(
      'POST',
      `/v1/charges/${encodeURIComponent(request.chargeId)}/capture`,
      request.amountMinor !== undefined ? { amount_minor: request.amountMinor } : {},
      request.idempotencyKey,
      options,
    );
    return toCharge(body as ChargeJson);
  }

  async voidCharge(request: VoidChargeRequest, options?: CallOptions): Promise<ProviderCharge> {
    const { body } = await this.call(
      'POST',
      `/v1/charges/${encodeURIComponent(request.chargeId)}/void`,
      {},
      request.idempotencyKey,
      options,
    );
    return toCharge(body as ChargeJson);
  }

  async createRefund(request: CreateRefundRequest, options?: CallOptions): Promise<ProviderRefund> {
    const { body } = await this.call(
      'POST',
      '/v1/refunds',
      { charge: request.chargeId, amount_minor: request.amountMinor, reference: request.reference },
      request.idempotencyKey,
      options,
    );
    return toRefund(body as RefundJson);
  }

  async findRefundByIdempotencyKey(idempotencyKey: string, options?: CallOptions): Promise<ProviderRefund | null> {
    const query = new URLSearchParams({ idempotency_key: idempotencyKey });
    const { body } = await this.call('GET', `/v1/refunds?${query}`, undefined, undefined, options);
    const [refund] = (body as ListJson<RefundJson>).data;
    return refund ? toRefund(refund) : null;
  }

  async retrieveCharge(chargeId: string, options?: CallOptions): Promise<ProviderCharge> {
    const { body } = await this.call('GET', `/v1/charges/${encodeURIComponent(chargeId)}`, undefined, undefined, options);
    return toCharge(body as ChargeJson);
  }

  async listBalanceTransactions(
    query: { from: Date; to: Date; startingAfter?: string; limit?: number },
    options?: CallOptions,
  ): Promise<{ data: ProviderBalanceTransaction[]; hasMore: boolean }> {
    const params = new URLSearchParams({ from: query.from.toISOString(), to: query.to.toISOString() });
    if (query.startingAfter !== undefined) params.set('starting_after', query.startingAfter);
    if (query.limit !== undefined) params.set('limit', String(query.limit));
    const { body } = await this.call('GET', `/v1/reports/balance_transactions?${params}`, undefined, undefined, options);
    const list = body as ListJson<BalanceTransactionJson>;
    return { data: list.data.map(toBalanceTransaction), hasMore: list.has_more === true };
  }

  /** The sandbox's disputes (GET/POST /v1/disputes). */
  readonly disputes: DisputeProvider = {
    retrieveDispute: async (disputeId, options) => {
      const { body } = await this.call('GET', `/v1/disputes/${encodeURIComponent(disputeId)}`, undefined, undefined, options);
      return toDispute(body as DisputeJson);
    },
    retrieveEvidence: async (disputeId, options) => {
      const { body } = await this.call('GET', `/v1/disputes/${encodeURIComponent(disputeId)}`, undefined, undefined, options);
      return (body as DisputeJson).evidence ?? {};
    },
    listDisputes: async (query, options) => {
      const params = new URLSearchParams({ limit: String(query.limit ?? 100) });
      if (query.startingAfter !== undefined) params.set('starting_after', query.startingAfter);
      const { body } = await this.call('GET', `/v1/disputes?${params}`, undefined, undefined, options);
      const list = body as ListJson<DisputeJson>;
      return { data: list.data.map(toDispute), hasMore: list.has_more === true };
    },
    updateDispute: async (request, options): Promise<ProviderDispute> => {
      const { body } = await this.call(
        'POST',
        `/v1/disputes/${encodeURIComponent(request.disputeId)}`,
        { evidence: request.evidence, submit: request.submit },
        request.idempotencyKey,
        options,
      );
      return toDispute(body as DisputeJson);
    },
    closeDispute: async (request, options): Promise<ProviderDispute> => {
      const { body } = await this.call('POST', `/v1/disputes/${encodeURIComponent(request.disputeId)}/close`, {}, request.idempotencyKey, options);
      return toDispute(body as DisputeJson);
    },
  };

  /** The sandbox's webhook, verified on its raw body (provider/sandbox/webhook.ts). */
  verifyWebhook(rawBody: string, headers: Record<string, string | undefined>, now: Date = new Date()): ProviderWebhookEvent {
    return verifySandboxWebhook(rawBody, headers, { secret: this.webhookSecret, toleranceSeconds: this.webhookToleranceSeconds }, now);
  }

  /**
   * One HTTP exchange. Resolves with 200 and 402 bodies; everything whose outcome is
   * unknown (network error, timeout, abort, 429, 5xx) becomes ProviderUnavailableError and
   * every other 4xx, a refusal that changed nothing, ProviderRejectedError.
   */
  private async call(
    method: 'GET' | 'POST',
    path: string,
    body: object | undefined,
    idempotencyKey: string | undefined,
    options: CallOptions | undefined,
  ): Promise<{ status: number; body: unknown }> {
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const signal = options?.signal ? AbortSignal.any([timeout, options.signal]) : timeout;
    const headers: Record<string, string | number> = { Accept: 'application/json' };
    const payload = body === undefined ? undefined : JSON.stringify(body);
    if (payload !== undefined) {
      headers['Content-Type'] = 'application/json';
      headers['Content-Length'] = Buffer.byteLength(payload);
    }
    if (idempotencyKey !== undefined) headers['Idempotency-Key'] = idempotencyKey;

    let response: { status: number; text: string; statusText: string };
    try {
      // Reading the body is still part of the exchange: a lost body is a lost response.
      response = await this.exchange(method, path, headers, payload, signal);
    } catch (error) {
      // Connection refused: no socket, so not one byte of the request was sent (a reused
      // keep-alive socket fails with a reset instead, whose outcome is unknown).
      const refused = !signal.aborted && (error as NodeJS.ErrnoException)?.code === 'ECONNREFUSED';
      const reason = timeout.aborted
        ? `no answer within ${this.timeoutMs} ms`
        : signal.aborted
          ? 'aborted by the caller'
          : refused
            ? 'connection refused (nothing was sent)'
            : 'network error';
      throw new ProviderUnavailableError(`sandbox ${method} ${path}: ${reason}`, undefined, { cause: error, notSent: refused });
    }
    const text = response.text;

    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    const status = response.status;
    if (status === 200 || status === 402) {
      if (parsed === undefined) throw new ProviderUnavailableError(`sandbox ${method} ${path}: ${status} without a JSON body`, status);
      return { status, body: parsed };
    }
    const error = (parsed as ErrorJson | undefined)?.error;
    const message = `sandbox ${method} ${path}: ${status} ${error?.message ?? (text.slice(0, 200) || response.statusText)}`;
    if (status === 429 || status >= 500) throw new ProviderUnavailableError(message, status);
    throw new ProviderRejectedError(message, status, error?.code ?? 'unknown');
  }
}
