/**
 * Driving the provider sandbox from tests, the chaos run and demos: completing a 3-D Secure
 * challenge as the customer's browser would (form POST, redirect not followed), and its
 * /_sandbox controls (docs/sandbox.md). Loopback only, like the sandbox.
 */

export type OutageMode = 'none' | 'unavailable' | 'down' | 'timeout';

export interface WebhookFaultSettings {
  duplicate?: number;
  reorder?: number;
  delay_ms?: number;
  loss?: number;
  reorder_hold_ms?: number;
}

/** One rule of POST /_sandbox/approval_rates: the approval probability of a card network and currency (`*`: any). */
export interface ApprovalRateSetting {
  network: 'visa' | 'mastercard' | '*';
  currency: string;
  rate: number;
}

export type Discrepancy =
  | { kind: 'direct_charge'; reference: string; amount_minor: number; currency: string }
  | { kind: 'dashboard_refund'; charge_id: string; amount_minor: number }
  | { kind: 'alter_amount'; charge_id: string; amount_minor: number };

/**
 * Submits the challenge page's form (result=approve|deny). Returns the status and where the
 * customer is sent (the return_url with payment_id and charge_id; null when there is none).
 */
export async function completeChallenge(challengeUrl: string, result: 'approve' | 'deny' | string): Promise<{ status: number; location: string | null }> {
  const response = await fetch(challengeUrl, { method: 'POST', body: new URLSearchParams({ result }), redirect: 'manual' });
  await response.arrayBuffer();
  return { status: response.status, location: response.headers.get('location') };
}

/** The sandbox's /_sandbox endpoints. Each resolves with the raw Response (status and JSON). */
export function sandboxControls(sandboxUrl: string) {
  const call = (path: string, body?: unknown) =>
    fetch(`${sandboxUrl}/_sandbox${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  return {
    call,
    outage: (mode: OutageMode) => call('/outage', { mode }),
    webhookFaults: (faults: WebhookFaultSettings) => call('/webhook_faults', faults),
    /** A charge's events, oldest first: id, type, state ('pending' | 'delivered' | 'lost'), attempts, object. */
    events: (chargeId: string) => call(`/events?charge=${encodeURIComponent(chargeId)}`),
    redeliver: (eventId: string) => call(`/events/${encodeURIComponent(eventId)}/redeliver`, {}),
    discrepancy: (discrepancy: Discrepancy | Record<string, unknown>) => call('/discrepancies', discrepancy),
    /** How its issuers answer the plain test cards: the rules replaced (`[]` clears them), or read back without an argument. */
    approvalRates: (rates?: ApprovalRateSetting[]) => (rates === undefined ? call('/approval_rates') : call('/approval_rates', { rates })),
  };
}
