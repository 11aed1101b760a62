import { randomBytes } from 'node:crypto';
import { completeChallenge } from '../testkit/sandbox';
import type { Prng } from './prng';

/** One client request under one Idempotency-Key, sent until it got a final answer. */
export interface Operation {
  kind: 'payment' | 'capture' | 'cancel' | 'refund' | 'customer' | 'evidence' | 'accept';
  /** The tenant's API key it was sent with. */
  apiKey: string;
  key: string;
  path: string;
  body: Record<string, unknown>;
  /** How many copies of the request were sent at once (duplicates of one key). */
  copies: number;
  /** Attempts over all copies, and how many of them got no answer (dropped by us, refused, reset). */
  attempts: number;
  lostAnswers: number;
  /** 500s seen on the way (never acceptable, even transiently). */
  serverErrors: number;
  /** The first final answer, exactly as received; null if none came before the deadline. */
  finalStatus: number | null;
  finalText: string | null;
  /** Every copy's final answer (they must all be the same bytes). */
  copyTexts: string[];
  paymentId: string | null;
}

/**
 * The sandbox's payment methods, weighted so approvals dominate but every behaviour shows up:
 * about a quarter are payments that wait: 3-D Secure, where the client plays the
 * customer at the challenge page, and SEPA-like debits the sandbox settles after a while;
 * about one in eight is disputed once captured (a chargeback, or an inquiry).
 */
const methodWeights = {
  pm_card_visa: 6,
  pm_card_slow: 2,
  pm_card_flaky: 2,
  pm_card_timeout_after_charge: 2,
  pm_card_declined: 1,
  pm_card_insufficient_funds: 1,
  pm_card_refund_fails: 1,
  pm_card_threeDSecureRequired: 3,
  pm_card_threeDSecureRequired_declined: 1,
  pm_sepa_debit: 2,
  pm_sepa_debit_fails: 1,
  pm_card_createDispute: 2,
  pm_card_createDisputeInquiry: 1,
};
/**
 * Recovering payments (docs/recovery.md): a story saves a card of its own that behaves as one of
 * these (a variant, never charged by another story: its declines count at the card network and
 * in its budget, both kept per card) for a customer of its own, then charges it
 * off-session with `recovery`. Each client's first story, with `pm_card_recoverAfter2` (so every
 * run has recovering payments for the census), then about one story in ten.
 */
const RECOVERY_STORY_CHANCE = 0.1;
const recoveryCardWeights = { pm_card_recoverAfter2: 4, pm_card_alwaysInsufficientFunds: 2, pm_card_mastercard_adviceRetryLater: 2, pm_card_stolen: 1 };
/** The payment methods that wait for the customer (requires_action) or the bank (processing). */
export const waitingMethods = new Set(['pm_card_threeDSecureRequired', 'pm_card_threeDSecureRequired_declined', 'pm_sepa_debit', 'pm_sepa_debit_fails']);
/** The payment methods whose captured charge the card network disputes (the sandbox opens it after SANDBOX_DISPUTE_AFTER_MS). */
export const disputeMethods = new Set(['pm_card_createDispute', 'pm_card_createDisputeInquiry']);
/**
 * What the merchant does about a dispute it sees: evidence that wins or loses (submitted), a
 * concession, or nothing (lost at its deadline; an inquiry escalates to a chargeback first).
 */
const disputeAnswerWeights = { winning: 3, losing: 2, accept: 2, none: 2 };
/** How long the client looks for its payment's dispute (well inside the chaos run's evidence deadline). */
const DISPUTE_LOOKUP_MS = 12_000;
const currencies = ['EUR', 'USD', 'GBP'];
/** 202 with Retry-After is "still running, ask again"; a 202 without it is a waiting payment's recorded answer. */
const nonFinal = new Set([429, 502, 503, 504]);
const RETURN_URL = 'http://127.0.0.1:9/return';

export interface WorkloadOptions {
  apiUrls: () => string[];
  apiKey: string;
  rng: Prng;
  /** Give up on one operation after this long (what remains is judged by the checker). */
  operationTimeoutMs: number;
  shouldStop: () => boolean;
  /**
   * The tenant's route starts at the PSP double (then sandbox-b): only the stories it can do,
   * the payment methods its kind's declaration weighs (ProviderDouble.chaosMethods), approved or
   * declined, with automatic or manual capture, then captures, cancels and refunds as everywhere.
   * Not told there: disputes (a double disputes only a card of its own, which sandbox-b does not
   * have), bank debits, saved cards and recovering payments (a card saved at the double cannot
   * fail over to sandbox-b by network transaction id: the double's ids are its own). Its kind's
   * integration tests cover those.
   */
  double?: Readonly<Record<string, number>>;
}

/**
 * The mixed workload of one client: new payments with every method, sometimes as several
 * concurrent copies of one key, and what follows (manual captures, cancels, partial and full
 * refunds, concurrent ones too); about one attempt in ten has its answer dropped by the
 * client, which then retries the same key as a real client would.
 */
export class Workload {
  readonly operations: Operation[] = [];
  readonly paymentIds = new Set<string>();
  /** What the client did as the customer of a 3-D Secure payment (approve, deny, abandon, cancel, race). */
  readonly customerActions: Record<string, number> = {};
  /** What the client did about its payments' disputes (an answer, none, or the dispute not seen in time). */
  readonly disputeActions: Record<string, number> = {};
  /** The recovering payments' first answers, by card and HTTP status (e.g. `pm_card_recoverAfter2 202`). */
  readonly recoveryStories: Record<string, number> = {};
  /** Stories begun by this client. */
  private stories = 0;
  /** The client's one customer (made at its first card saving), and the cards saved for it. */
  private customer: string | null = null;
  private readonly savedMethods: string[] = [];

  constructor(private readonly options: WorkloadOptions) {}

  async runClient(): Promise<void> {
    while (!this.options.shouldStop()) {
      try {
        await this.oneStory();
      } catch (error) {
        console.error('chaos workload: a story broke', error);
      }
    }
  }

  /**
   * One card payment and nothing after it: the run's probe while sandbox-a is down, whose first
   * attempt there takes no money and must move on to sandbox-b (a failover the census then audits).
   * Once the client has saved a card, the probe charges it off-session: sandbox-b, which never saw
   * the card, charges it by the card network's transaction id.
   */
  async payOnce(): Promise<void> {
    const card = this.savedMethods.length > 0 ? { payment_method: this.savedMethods[0], customer: this.customer, off_session: true } : { payment_method: 'pm_card_visa' };
    const paying = this.operation('payment', '/v1/payments', { order_id: this.key('ord'), amount_minor: 1_500, currency: 'EUR', ...card }, 1);
    const answer = await this.send(paying);
    const payment = answer ? (JSON.parse(answer) as { id?: string; error?: { payment?: { id: string } } }) : null;
    const id = payment?.id ?? payment?.error?.payment?.id ?? null;
    paying.paymentId = id;
    if (id) this.paymentIds.add(id);
  }

  private key(label: string): string {
    return `chaos-${label}-${randomBytes(8).toString('hex')}`;
  }

  /** The client's customer, made once (null while the API gave no answer). */
  private async ensureCustomer(): Promise<string | null> {
    if (this.customer) return this.customer;
    const answer = await this.send(this.operation('customer', '/v1/customers', { email: `${this.key('c')}@example.com` }, 1));
    this.customer = answer ? ((JSON.parse(answer) as { id?: string }).id ?? null) : null;
    return this.customer;
  }

  /** The customer's saved cards as the API lists them (saved in the transaction that recorded the payment's success). */
  private async learnSavedMethods(customer: string): Promise<void> {
    // An API down for a moment: learnt at the next saving.
    const listed = await this.read<{ data: { id: string }[] }>(`/v1/customers/${customer}/payment_methods?limit=100`);
    for (const method of listed?.data ?? []) if (!this.savedMethods.includes(method.id)) this.savedMethods.push(method.id);
  }

  /** One GET of the API (at either process) as the tenant; null when it did not answer 200. */
  private async read<T>(path: string): Promise<T | null> {
    const urls = this.options.apiUrls();
    try {
      const response = await fetch(`${urls[Math.floor(Math.random() * urls.length)]!}${path}`, {
        headers: { authorization: `Bearer ${this.options.apiKey}` },
        signal: AbortSignal.timeout(10_000),
      });
      if (response.status === 200) return (await response.json()) as T;
      await response.arrayBuffer();
    } catch {
      // an API down for a moment
    }
    return null;
  }

  /**
   * The body of a story's payment: mostly a new card; sometimes (once the client saved a card)
   * a saved card charged off-session, or a visa payment that saves its card for the customer.
   */
  private async paymentBody(method: string, manual: boolean, amount: number): Promise<Record<string, unknown>> {
    const { rng } = this.options;
    const common = { order_id: this.key('ord'), amount_minor: amount, currency: rng.pick(currencies), capture_method: manual ? 'manual' : 'automatic' };
    if (this.options.double) return { ...common, payment_method: method };
    if (this.savedMethods.length > 0 && rng.chance(0.15)) {
      return { ...common, payment_method: rng.pick(this.savedMethods), customer: this.customer, off_session: true };
    }
    const customer = method === 'pm_card_visa' && !manual && rng.chance(0.5) ? await this.ensureCustomer() : null;
    return {
      ...common,
      payment_method: method,
      ...(waitingMethods.has(method) ? { return_url: RETURN_URL } : {}),
      ...(customer ? { customer, setup_future_usage: 'off_session' } : {}),
    };
  }

  /**
   * A recovering payment: a customer of its own saves a recovery card on-session, then the card is
   * charged off-session with a recovery window of 1 to 3 days (8.6 to 26 s at the run's scale).
   * Sometimes the merchant cancels it while it recovers.
   */
  private async recoveryStory(first: boolean): Promise<void> {
    const { rng } = this.options;
    const card = first ? 'pm_card_recoverAfter2' : rng.weighted(recoveryCardWeights);
    const created = await this.send(this.operation('customer', '/v1/customers', { email: `${this.key('r')}@example.com` }, 1));
    const customer = created ? ((JSON.parse(created) as { id?: string }).id ?? null) : null;
    if (!customer) return;
    // A card of the story's own (a variant of the test card: docs/sandbox.md): its budget and the network's count are its alone.
    const own = `${card}__${customer.replace(/[^A-Za-z0-9]/g, '').slice(-24)}`;
    const saving = this.operation('payment', '/v1/payments', { order_id: this.key('ord'), amount_minor: 1_000, currency: 'EUR', payment_method: own, customer, setup_future_usage: 'off_session' }, 1);
    const saved = await this.send(saving);
    const savedPayment = saved ? (JSON.parse(saved) as { id?: string; status?: string }) : null;
    if (savedPayment?.id) (saving.paymentId = savedPayment.id), this.paymentIds.add(savedPayment.id);
    if (savedPayment?.status !== 'succeeded') return;
    let method: string | null = null;
    for (let tries = 0; tries < 10 && !method && !this.options.shouldStop(); tries++) {
      method = (await this.read<{ data: { id: string }[] }>(`/v1/customers/${customer}/payment_methods`))?.data[0]?.id ?? null;
      if (!method) await new Promise((r) => setTimeout(r, 500));
    }
    if (!method) return;
    const body = { order_id: this.key('ord'), amount_minor: rng.int(100, 50_000), currency: rng.pick(currencies), payment_method: method, customer, off_session: true, recovery: { window_days: rng.int(1, 3) } };
    const paying = this.operation('payment', '/v1/payments', body, rng.chance(0.2) ? 2 : 1);
    const answer = await this.send(paying);
    const payment = answer ? (JSON.parse(answer) as { id?: string; status?: string; error?: { payment?: { id: string } } }) : null;
    const id = payment?.id ?? payment?.error?.payment?.id ?? null;
    paying.paymentId = id;
    if (id) this.paymentIds.add(id);
    const outcome = `${card} ${paying.finalStatus ?? 'no answer'}`;
    this.recoveryStories[outcome] = (this.recoveryStories[outcome] ?? 0) + 1;
    if (id && payment?.status === 'recovering' && rng.chance(0.15)) {
      await new Promise((r) => setTimeout(r, rng.int(500, 6000)));
      await this.send(this.operation('cancel', `/v1/payments/${id}/cancel`, {}, 1, id));
    }
  }

  /** A payment and, depending on how it ended, what a merchant does next. */
  private async oneStory(): Promise<void> {
    const { rng } = this.options;
    const first = this.stories++ === 0;
    if (!this.options.double && (first || rng.chance(RECOVERY_STORY_CHANCE))) return this.recoveryStory(first);
    const method = this.options.double ? rng.weighted(this.options.double) : rng.weighted(methodWeights);
    const manual = rng.chance(0.3);
    const amount = rng.int(100, 50_000);
    const body = await this.paymentBody(method, manual, amount);
    const disputed = disputeMethods.has(body.payment_method as string);
    const paying = this.operation('payment', '/v1/payments', body, rng.chance(0.2) ? rng.int(2, 4) : 1);
    const answer = await this.send(paying);
    let payment = answer
      ? (JSON.parse(answer) as { id?: string; status?: string; amount_captured_minor?: number; next_action?: { redirect_to_url?: { url: string } } | null; error?: { payment?: { id: string } } })
      : null;
    const id = payment?.id ?? payment?.error?.payment?.id ?? null;
    paying.paymentId = id;
    if (id) this.paymentIds.add(id);
    if (!id || this.options.shouldStop()) return;
    if (body.setup_future_usage && payment?.status === 'succeeded') await this.learnSavedMethods(body.customer as string);

    if (payment?.status === 'requires_action' && payment.next_action?.redirect_to_url) {
      // The client plays the customer at the challenge page, and sometimes the merchant's cancel.
      const url = payment.next_action.redirect_to_url.url;
      const act = rng.weighted({ approve: 6, deny: 1, abandon: 1, cancel: 1, race: 1 });
      this.customerActions[act] = (this.customerActions[act] ?? 0) + 1;
      const cancel = () => this.send(this.operation('cancel', `/v1/payments/${id}/cancel`, {}, 1, id));
      if (act === 'approve' || act === 'deny') await this.challenge(url, act);
      else if (act === 'cancel') await cancel();
      else if (act === 'race') await Promise.all([this.challenge(url, 'approve'), cancel()]);
      if (act === 'abandon') return; // expires after AUTHENTICATION_WINDOW_SECONDS: voided at the PSP
    }
    if (payment?.status === 'requires_action' || payment?.status === 'processing') {
      // Where the wait ended (webhook or poll), for what the merchant does next.
      payment = await this.decidedPayment(id);
      if (!payment) return;
    }

    if (payment?.status === 'requires_capture') {
      const next = rng.weighted({ capture: 5, partialCapture: 2, cancel: 3, race: 1, leave: 1 });
      if (next === 'leave') return; // an authorization left waiting: its workflow runs on, with a reason
      const capture = (amountMinor?: number) => this.operation('capture', `/v1/payments/${id}/capture`, amountMinor ? { amount_minor: amountMinor } : {}, 1, id);
      const cancel = () => this.operation('cancel', `/v1/payments/${id}/cancel`, {}, 1, id);
      const ops =
        next === 'race' ? [capture(), cancel()] : next === 'cancel' ? [cancel()] : [capture(next === 'partialCapture' ? rng.int(1, amount) : undefined)];
      const answers = await Promise.all(ops.map((op) => this.send(op)));
      const captured = answers.map((a) => (a ? (JSON.parse(a) as { status?: string; amount_captured_minor?: number }) : null)).find((p) => p?.status === 'succeeded');
      if (captured && disputed) await this.answerDispute(id);
      else if (captured && rng.chance(0.5)) await this.refunds(id, captured.amount_captured_minor ?? amount);
    } else if (payment?.status === 'succeeded' && disputed) {
      await this.answerDispute(id);
    } else if (payment?.status === 'succeeded' && rng.chance(0.6)) {
      await this.refunds(id, amount);
    }
  }

  /**
   * A disputed payment's merchant: once the dispute shows in the API, evidence that wins or
   * loses (submitted), a concession, or no answer at all. Never a refund: the network holds a
   * chargeback's money (409 payment_disputed).
   */
  private async answerDispute(paymentId: string): Promise<void> {
    const disputeId = await this.disputeOf(paymentId);
    const answer = disputeId ? this.options.rng.weighted(disputeAnswerWeights) : 'not seen in time';
    this.disputeActions[answer] = (this.disputeActions[answer] ?? 0) + 1;
    if (!disputeId || answer === 'none' || answer === 'not seen in time') return;
    const op =
      answer === 'accept'
        ? this.operation('accept', `/v1/disputes/${disputeId}/accept`, {}, 1, paymentId)
        : this.operation('evidence', `/v1/disputes/${disputeId}/evidence`, { evidence: { uncategorized_text: `${answer}_evidence: the customer received the goods` }, submit: true }, 1, paymentId);
    await this.send(op);
  }

  /** The id of the payment's dispute once the API lists it (null: not within DISPUTE_LOOKUP_MS). */
  private async disputeOf(paymentId: string): Promise<string | null> {
    const deadline = Date.now() + DISPUTE_LOOKUP_MS;
    while (Date.now() < deadline) {
      const listed = await this.read<{ data: { id: string }[] }>(`/v1/disputes?payment_id=${paymentId}`);
      if (listed?.data[0]) return listed.data[0].id;
      await new Promise((r) => setTimeout(r, 500));
    }
    return null;
  }

  /**
   * Submits the challenge page's form as the customer's browser would, through sandbox restarts.
   * A PSP that sends the customer back to us (challengeReturn `orchestrator`: a 303 to our return route) is followed there
   * most of the time, as a browser would; the rest never come back. Our route's own 303 (to the
   * merchant's return_url) is not followed.
   */
  private async challenge(url: string, result: 'approve' | 'deny'): Promise<void> {
    for (let attempt = 0; attempt < 30 && !this.options.shouldStop(); attempt++) {
      try {
        const { status, location } = await completeChallenge(url, result);
        if (status === 303 && location !== null && /\/return\/pay_[0-9a-z]+\?redirectResult=/.test(location) && this.options.rng.chance(0.8)) await this.comeBack(location);
        if (status < 500) return;
      } catch {
        // the sandbox is down for a moment: the customer clicks again
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
  }

  /** The customer's browser at our return route (loopback only), through API restarts; where it is sent on is not followed. */
  private async comeBack(location: string): Promise<void> {
    if (!['127.0.0.1', 'localhost'].includes(new URL(location).hostname)) return;
    for (let attempt = 0; attempt < 10 && !this.options.shouldStop(); attempt++) {
      try {
        const response = await fetch(location, { redirect: 'manual', signal: AbortSignal.timeout(15_000) });
        await response.arrayBuffer();
        if (response.status < 500) {
          this.customerActions['came back'] = (this.customerActions['came back'] ?? 0) + 1;
          return;
        }
      } catch {
        // the API is restarting: the customer reloads
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
  }

  /** The payment once it no longer waits for the customer or the bank, decided (null: still waiting after a minute, or unreadable). */
  private async decidedPayment(id: string): Promise<{ id: string; status: string; amount_captured_minor?: number } | null> {
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      const payment = await this.read<{ id: string; status: string; amount_captured_minor?: number }>(`/v1/payments/${id}`);
      if (payment && payment.status !== 'requires_action' && payment.status !== 'processing') return payment;
      await new Promise((r) => setTimeout(r, 1000));
    }
    return null;
  }

  /** One refund (partial or full), or two at once whose sum may exceed what is left, or one key sent twice at once. */
  private async refunds(paymentId: string, captured: number): Promise<void> {
    const { rng } = this.options;
    const refund = (amountMinor: number, copies = 1) => this.operation('refund', `/v1/payments/${paymentId}/refunds`, { amount_minor: amountMinor }, copies, paymentId);
    const shape = rng.weighted({ full: 2, partial: 3, concurrent: 2, duplicated: 1 });
    const ops =
      shape === 'full'
        ? [refund(captured)]
        : shape === 'partial'
          ? [refund(rng.int(1, Math.max(1, Math.floor(captured / 2))))]
          : shape === 'concurrent'
            ? [refund(rng.int(1, captured)), refund(rng.int(1, captured))]
            : [refund(rng.int(1, captured), 3)];
    await Promise.all(ops.map((op) => this.send(op)));
  }

  private operation(kind: Operation['kind'], path: string, body: Record<string, unknown>, copies: number, paymentId: string | null = null): Operation {
    const op: Operation = { kind, apiKey: this.options.apiKey, key: this.key(kind), path, body, copies, attempts: 0, lostAnswers: 0, serverErrors: 0, finalStatus: null, finalText: null, copyTexts: [], paymentId };
    this.operations.push(op);
    return op;
  }

  /** Sends the operation's copies at once, each until it gets a final answer; returns the first final answer's text. */
  private async send(op: Operation): Promise<string | null> {
    const copies = await Promise.all(Array.from({ length: op.copies }, () => this.sendOne(op)));
    for (const copy of copies) if (copy) op.copyTexts.push(copy.text);
    const first = copies.find(Boolean) ?? null;
    if (first) {
      op.finalStatus = first.status;
      op.finalText = first.text;
    }
    return first?.text ?? null;
  }

  private async sendOne(op: Operation): Promise<{ status: number; text: string } | null> {
    const { rng } = this.options;
    const deadline = Date.now() + this.options.operationTimeoutMs;
    while (Date.now() < deadline) {
      op.attempts++;
      const urls = this.options.apiUrls();
      const url = urls[Math.floor(Math.random() * urls.length)]!;
      // The client gives up on some answers early: the request may well have been executed.
      const lose = rng.chance(0.1);
      try {
        const response = await fetch(`${url}${op.path}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${this.options.apiKey}`, 'idempotency-key': op.key, 'content-type': 'application/json' },
          body: JSON.stringify(op.body),
          signal: AbortSignal.timeout(lose ? rng.int(20, 1500) : 30_000),
        });
        const text = await response.text();
        if (response.status >= 500 && response.status !== 503) op.serverErrors++;
        const running = response.status === 202 && response.headers.has('retry-after');
        if (!running && !nonFinal.has(response.status) && response.status < 500) return { status: response.status, text };
      } catch {
        op.lostAnswers++;
      }
      await new Promise((r) => setTimeout(r, 300 + Math.random() * 700));
    }
    return null;
  }
}
