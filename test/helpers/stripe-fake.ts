import { randomBytes } from 'node:crypto';
import Stripe from 'stripe';
import { startScriptedServer, type ScriptedAnswer, type ScriptedRequest } from './scripted-server';

/**
 * A Stripe that behaves as Stripe's test mode does for the test PaymentMethods our names map to
 * (provider/stripe/test-payment-methods.ts), on the scripted loopback server: stripe-mock checks
 * the shape of each request (test/integration/stripe-orchestrator.test.ts) but always answers a
 * failed payment, so the outcomes of the flows every kind runs (test/integration/kinds/) are
 * this fake's. It keeps PaymentIntents, their latest Charge, Refunds, Customers with the
 * PaymentMethods attached to them, and Disputes, in memory; replays a mutating request's first
 * answer under its Idempotency-Key (and does nothing again); finds PaymentIntents by metadata
 * through its search; shows a challenge page (Approve / Deny posting `result`, as the sandbox's)
 * for a card that needs 3-D Secure; opens a dispute for `pm_card_createDispute`; and sends the
 * events of what changes after an answer (a challenge's outcome, a dispute) signed to the
 * webhook URL. `loseAnswers`: what is asked is done, and the connection cut before the answer.
 */

type Intent = {
  id: string;
  object: 'payment_intent';
  amount: number;
  amount_received: number;
  currency: string;
  status: string;
  capture_method: 'automatic' | 'manual';
  customer: string | null;
  payment_method: string | null;
  setup_future_usage: string | null;
  metadata: Record<string, string>;
  last_payment_error: { code: string; decline_code: string; message: string } | null;
  next_action: { type: string; redirect_to_url?: { url: string; return_url: string | null } } | null;
  latest_charge: {
    id: string;
    object: 'charge';
    amount_refunded: number;
    status: string;
    created: number;
    payment_method_details: { type: 'card'; card: { brand: string; last4: string; exp_month: number; exp_year: number; network_transaction_id: string } };
  } | null;
  created: number;
};

type Refund = { id: string; object: 'refund'; amount: number; payment_intent: string; status: string; failure_reason: string | null; metadata: Record<string, string>; created: number };

type Dispute = {
  id: string;
  object: 'dispute';
  amount: number;
  currency: string;
  reason: string;
  status: string;
  created: number;
  charge: string;
  payment_intent: string;
  evidence: Record<string, string>;
  evidence_details: { due_by: number; submission_count: number };
  balance_transactions: { fee: number }[];
};

/** Our test PaymentMethods as Stripe's test mode treats them (the ones provider/stripe/test-payment-methods.ts sends). */
const behaviours: Record<string, 'approve' | 'decline' | 'insufficient_funds' | 'challenge_on_session' | 'challenge_always' | 'dispute' | 'inquiry' | 'refund_fails'> = {
  pm_card_visa: 'approve',
  pm_card_mastercard: 'approve',
  pm_card_chargeDeclined: 'decline',
  pm_card_chargeDeclinedInsufficientFunds: 'insufficient_funds',
  pm_card_authenticationRequiredOnSetup: 'challenge_on_session',
  pm_card_authenticationRequired: 'challenge_always',
  pm_card_createDispute: 'dispute',
  pm_card_createDisputeInquiry: 'inquiry',
  pm_card_refundFail: 'refund_fails',
};

export interface StripeFake {
  url: string;
  host: string;
  port: number;
  /** The PaymentIntents made for one of our references (metadata[reference]), declined ones included. */
  intentsFor(reference: string): readonly Intent[];
  /** The Refunds made of a PaymentIntent. */
  refundsOf(intentId: string): readonly Refund[];
  /** Every request it was sent (control calls aside). */
  readonly requests: readonly ScriptedRequest[];
  /** Where its events go (signed with webhookSecret); null: none are sent. */
  setWebhookUrl(url: string | null): void;
  /** On: every request is done and its answer lost (the connection cut). */
  loseAnswers(on: boolean): void;
  close(): Promise<void>;
}

const now = () => Math.floor(Date.now() / 1000);
const id = (prefix: string) => `${prefix}_${randomBytes(12).toString('hex')}`;

export async function startStripeFake(options: { webhookSecret: string; disputeAfterMs?: number }): Promise<StripeFake> {
  const intents = new Map<string, Intent>();
  const refunds: Refund[] = [];
  const disputes = new Map<string, Dispute>();
  /** Each customer's attached PaymentMethods, by id: the behaviour of the test card saved. */
  const customers = new Map<string, Map<string, string>>();
  /** Each PaymentIntent's test card behaviour (Stripe keeps it with the card; not shown in the intent). */
  const behaviourOf = new Map<string, string>();
  const answered = new Map<string, ScriptedAnswer>();
  const timers = new Set<NodeJS.Timeout>();
  const seen: ScriptedRequest[] = [];
  const signer = new Stripe('sk_test_fake');
  let webhookUrl: string | null = null;
  let losing = false;
  let base = '';

  const send = (type: string, object: unknown) => {
    if (!webhookUrl) return;
    const payload = JSON.stringify({ id: id('evt'), object: 'event', api_version: '2024-06-20', type, created: now(), data: { object }, livemode: false, pending_webhooks: 1, request: { id: null, idempotency_key: null } });
    const signature = signer.webhooks.generateTestHeaderString({ payload, secret: options.webhookSecret });
    void fetch(webhookUrl, { method: 'POST', headers: { 'content-type': 'application/json', 'stripe-signature': signature }, body: payload }).catch(() => {});
  };
  const later = (ms: number, run: () => void) => {
    const timer = setTimeout(() => (timers.delete(timer), run()), ms);
    timers.add(timer);
  };

  const error = (status: number, type: string, code: string, message: string, extra: Record<string, unknown> = {}): ScriptedAnswer => ({ status, body: { error: { type, code, message, ...extra } } });
  const ok = (body: unknown): ScriptedAnswer => ({ status: 200, body });
  const missing = (what: string) => error(404, 'invalid_request_error', 'resource_missing', `No such ${what}`);

  /** The charge succeeds (captured now, or authorized for a manual capture). */
  const authorize = (intent: Intent) => {
    intent.status = intent.capture_method === 'manual' ? 'requires_capture' : 'succeeded';
    intent.amount_received = intent.capture_method === 'manual' ? 0 : intent.amount;
    intent.next_action = null;
    intent.latest_charge = {
      id: id('ch'),
      object: 'charge',
      amount_refunded: 0,
      status: 'succeeded',
      created: now(),
      payment_method_details: { type: 'card', card: { brand: 'visa', last4: '4242', exp_month: 12, exp_year: 2034, network_transaction_id: String(100_000_000_000_000 + randomBytes(5).readUIntBE(0, 5)) } },
    };
    if (intent.setup_future_usage === 'off_session' && intent.customer) {
      const saved = id('pm');
      const behaviour = behaviourOf.get(intent.id)!;
      customers.get(intent.customer)!.set(saved, behaviour === 'challenge_on_session' ? 'approve' : behaviour);
      intent.payment_method = saved;
    }
    const opens = behaviourOf.get(intent.id);
    if ((opens === 'dispute' || opens === 'inquiry') && intent.status === 'succeeded') later(options.disputeAfterMs ?? 200, () => openDispute(intent, opens));
  };

  const openDispute = (intent: Intent, behaviour: 'dispute' | 'inquiry') => {
    const dispute: Dispute = {
      id: id('dp'),
      object: 'dispute',
      amount: intent.amount_received,
      currency: intent.currency,
      reason: 'fraudulent',
      status: behaviour === 'dispute' ? 'needs_response' : 'warning_needs_response',
      created: now(),
      charge: intent.latest_charge!.id,
      payment_intent: intent.id,
      evidence: {},
      evidence_details: { due_by: now() + 7 * 24 * 3600, submission_count: 0 },
      balance_transactions: behaviour === 'dispute' ? [{ fee: 1500 }] : [],
    };
    disputes.set(dispute.id, dispute);
    send('charge.dispute.created', dispute);
    if (behaviour === 'dispute') send('charge.dispute.funds_withdrawn', dispute);
  };

  const createIntent = (form: URLSearchParams): ScriptedAnswer => {
    const amount = Number(form.get('amount'));
    const method = form.get('payment_method');
    const customer = form.get('customer');
    if (!Number.isInteger(amount) || amount <= 0 || !form.get('currency') || !method) return error(400, 'invalid_request_error', 'parameter_missing', 'amount, currency and payment_method are required');
    if (customer && !customers.has(customer)) return missing(`customer: '${customer}'`);
    const savedBehaviour = customer ? customers.get(customer)!.get(method) : undefined;
    const behaviour = savedBehaviour ?? behaviours[method];
    if (!behaviour) return missing(`PaymentMethod: '${method}'`);
    const metadata = Object.fromEntries([...form].filter(([k]) => k.startsWith('metadata[')).map(([k, v]) => [k.slice(9, -1), v]));
    const intent: Intent = {
      id: id('pi'),
      object: 'payment_intent',
      amount,
      amount_received: 0,
      currency: form.get('currency')!,
      status: 'requires_confirmation',
      capture_method: form.get('capture_method') === 'manual' ? 'manual' : 'automatic',
      customer,
      payment_method: method,
      setup_future_usage: form.get('setup_future_usage'),
      metadata,
      last_payment_error: null,
      next_action: null,
      latest_charge: null,
      created: now(),
    };
    intents.set(intent.id, intent);
    behaviourOf.set(intent.id, behaviour);
    const offSession = form.get('off_session') === 'true';
    const decline = (code: string, declineCode: string, message: string): ScriptedAnswer => {
      intent.status = 'requires_payment_method';
      intent.last_payment_error = { code, decline_code: declineCode, message };
      return error(402, 'card_error', code, message, { decline_code: declineCode, payment_intent: intent });
    };
    if (behaviour === 'decline') return decline('card_declined', 'generic_decline', 'Your card was declined.');
    if (behaviour === 'insufficient_funds') return decline('card_declined', 'insufficient_funds', 'Your card has insufficient funds.');
    const challenged = behaviour === 'challenge_always' || (behaviour === 'challenge_on_session' && savedBehaviour === undefined);
    if (challenged && offSession) return decline('authentication_required', 'authentication_required', 'Your card was declined. This transaction requires authentication.');
    if (challenged) {
      intent.status = 'requires_action';
      const returnUrl = form.get('return_url');
      // Without a return_url only Stripe.js could show the challenge (use_stripe_sdk).
      intent.next_action = returnUrl ? { type: 'redirect_to_url', redirect_to_url: { url: `${base}/challenge/${intent.id}`, return_url: returnUrl } } : { type: 'use_stripe_sdk' };
      return ok(intent);
    }
    authorize(intent);
    return ok(intent);
  };

  const modifyIntent = (intent: Intent, action: 'capture' | 'cancel', form: URLSearchParams): ScriptedAnswer => {
    if (action === 'capture') {
      if (intent.status !== 'requires_capture') return error(400, 'invalid_request_error', 'payment_intent_unexpected_state', `This PaymentIntent could not be captured because it has a status of ${intent.status}.`);
      const amount = form.get('amount_to_capture') === null ? intent.amount : Number(form.get('amount_to_capture'));
      if (amount > intent.amount) return error(400, 'invalid_request_error', 'amount_too_large', 'The amount to capture is more than was authorized.');
      intent.status = 'succeeded';
      intent.amount_received = amount;
      return ok(intent);
    }
    if (!['requires_capture', 'requires_action', 'requires_payment_method', 'requires_confirmation'].includes(intent.status)) {
      return error(400, 'invalid_request_error', 'payment_intent_unexpected_state', `You cannot cancel this PaymentIntent because it has a status of ${intent.status}.`);
    }
    intent.status = 'canceled';
    intent.next_action = null;
    return ok(intent);
  };

  const createRefund = (form: URLSearchParams): ScriptedAnswer => {
    const intent = intents.get(form.get('payment_intent') ?? '');
    if (!intent) return missing(`payment_intent: '${form.get('payment_intent')}'`);
    if (intent.status !== 'succeeded' || !intent.latest_charge) return error(400, 'invalid_request_error', 'charge_not_refundable', 'This PaymentIntent has no successful charge to refund.');
    if ([...disputes.values()].some((d) => d.payment_intent === intent.id && d.status === 'needs_response')) return error(400, 'invalid_request_error', 'charge_disputed', 'This charge is disputed.');
    const amount = form.get('amount') === null ? intent.amount_received - intent.latest_charge.amount_refunded : Number(form.get('amount'));
    if (amount > intent.amount_received - intent.latest_charge.amount_refunded) return error(400, 'invalid_request_error', 'amount_too_large', 'Refund amount is greater than the unrefunded amount on the charge.');
    const metadata = Object.fromEntries([...form].filter(([k]) => k.startsWith('metadata[')).map(([k, v]) => [k.slice(9, -1), v]));
    const fails = behaviourOf.get(intent.id) === 'refund_fails';
    const refund: Refund = { id: id('re'), object: 'refund', amount, payment_intent: intent.id, status: fails ? 'failed' : 'succeeded', failure_reason: fails ? 'declined' : null, metadata, created: now() };
    if (!fails) intent.latest_charge.amount_refunded += amount;
    refunds.push(refund);
    return ok(refund);
  };

  const expanded = (dispute: Dispute) => ({ ...dispute, payment_intent: intents.get(dispute.payment_intent) ?? dispute.payment_intent });

  const api = (request: ScriptedRequest): ScriptedAnswer => {
    const url = new URL(request.path, 'http://stripe');
    const form = new URLSearchParams(request.body);
    const path = url.pathname;
    if (request.method === 'GET') {
      if (path === '/v1/payment_intents/search') {
        const match = /^metadata\['([a-z_]+)'\]:'((?:[^'\\]|\\.)*)'$/.exec(url.searchParams.get('query') ?? '');
        if (!match) return error(400, 'invalid_request_error', 'parameter_invalid', 'unsupported search query');
        const value = match[2]!.replace(/\\(.)/g, '$1');
        return ok({ object: 'search_result', url: path, has_more: false, next_page: null, data: [...intents.values()].filter((i) => i.metadata[match[1]!] === value) });
      }
      const intent = /^\/v1\/payment_intents\/([^/]+)$/.exec(path);
      if (intent) return intents.has(intent[1]!) ? ok(intents.get(intent[1]!)) : missing(`payment_intent: '${intent[1]}'`);
      if (path === '/v1/refunds') return ok({ object: 'list', url: path, has_more: false, data: [...refunds].reverse() });
      if (path === '/v1/disputes') return ok({ object: 'list', url: path, has_more: false, data: [...disputes.values()].reverse().map(expanded) });
      const dispute = /^\/v1\/disputes\/([^/]+)$/.exec(path);
      if (dispute) return disputes.has(dispute[1]!) ? ok(expanded(disputes.get(dispute[1]!)!)) : missing(`dispute: '${dispute[1]}'`);
      return missing(`GET ${path}`);
    }
    const key = request.headers['idempotency-key'];
    const replay = typeof key === 'string' ? answered.get(`${path}\n${key}`) : undefined;
    if (replay) return replay;
    const answer = ((): ScriptedAnswer => {
      if (path === '/v1/customers') {
        const customer = id('cus');
        customers.set(customer, new Map());
        return ok({ id: customer, object: 'customer', metadata: {} });
      }
      if (path === '/v1/payment_intents') return createIntent(form);
      const modify = /^\/v1\/payment_intents\/([^/]+)\/(capture|cancel)$/.exec(path);
      if (modify) {
        const intent = intents.get(modify[1]!);
        return intent ? modifyIntent(intent, modify[2] as 'capture' | 'cancel', form) : missing(`payment_intent: '${modify[1]}'`);
      }
      if (path === '/v1/refunds') return createRefund(form);
      const dispute = /^\/v1\/disputes\/([^/]+)(\/close)?$/.exec(path);
      if (dispute) {
        const held = disputes.get(dispute[1]!);
        if (!held) return missing(`dispute: '${dispute[1]}'`);
        if (!['needs_response', 'warning_needs_response'].includes(held.status)) return error(400, 'invalid_request_error', 'dispute_not_open', 'This dispute is already closed.');
        if (dispute[2]) held.status = 'lost';
        else {
          for (const [k, v] of form) if (k.startsWith('evidence[')) held.evidence[k.slice(9, -1)] = v;
          if (form.get('submit') === 'true') {
            held.evidence_details.submission_count += 1;
            held.status = held.status === 'needs_response' ? 'under_review' : 'warning_under_review';
          }
        }
        send(dispute[2] ? 'charge.dispute.closed' : 'charge.dispute.updated', held);
        return ok(expanded(held));
      }
      return missing(`POST ${path}`);
    })();
    if (typeof key === 'string' && answer !== 'cut' && answer.status < 500) answered.set(`${path}\n${key}`, answer);
    return answer;
  };

  /** The challenge page of a PaymentIntent that requires action: Approve or Deny, posted as `result`. */
  const challenge = (request: ScriptedRequest, intentId: string): ScriptedAnswer => {
    const intent = intents.get(intentId);
    if (!intent) return { status: 404, body: { error: 'no such challenge' } };
    if (request.method === 'GET') return { status: 200, headers: { 'content-type': 'text/html' }, body: `<form method="post"><button name="result" value="approve">Approve</button><button name="result" value="deny">Deny</button></form>` };
    const result = new URLSearchParams(request.body).get('result');
    if (result !== 'approve' && result !== 'deny') return { status: 400, body: { error: 'result must be approve or deny' } };
    const returnUrl = intent.next_action?.redirect_to_url?.return_url ?? null;
    if (intent.status === 'requires_action') {
      if (result === 'approve') authorize(intent);
      else {
        intent.status = 'requires_payment_method';
        intent.next_action = null;
        intent.last_payment_error = { code: 'payment_intent_authentication_failure', decline_code: 'authentication_failed', message: 'The customer did not authenticate.' };
      }
      send(intent.status === 'succeeded' ? 'payment_intent.succeeded' : intent.status === 'requires_capture' ? 'payment_intent.amount_capturable_updated' : 'payment_intent.payment_failed', intent);
    }
    if (!returnUrl) return { status: 200, body: { status: intent.status } };
    const back = new URL(returnUrl);
    back.searchParams.set('payment_intent', intent.id);
    return { status: 303, headers: { location: back.toString() }, body: {} };
  };

  const server = await startScriptedServer((request) => {
    const path = new URL(request.path, 'http://stripe').pathname;
    const page = /^\/challenge\/([^/]+)$/.exec(path);
    if (page) return challenge(request, page[1]!);
    seen.push(request);
    const answer = api(request);
    return losing ? 'cut' : answer;
  });
  base = server.url;
  const { hostname, port } = new URL(server.url);
  return {
    url: server.url,
    host: hostname,
    port: Number(port),
    intentsFor: (reference) => [...intents.values()].filter((i) => i.metadata['reference'] === reference),
    refundsOf: (intentId) => refunds.filter((r) => r.payment_intent === intentId),
    requests: seen,
    setWebhookUrl: (url) => {
      webhookUrl = url;
    },
    loseAnswers: (on) => {
      losing = on;
    },
    async close() {
      for (const timer of timers) clearTimeout(timer);
      await server.close();
    },
  };
}
