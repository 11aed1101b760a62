import { randomBytes } from 'node:crypto';

/**
 * The Adyen double's 3-D Secure: the issuer's challenge page that Adyen's `RedirectShopper`
 * action sends the shopper to, and the `redirectResult` the shopper brings back to the
 * merchant's returnUrl, which `/payments/details` exchanges for the payment's outcome.
 *
 * GET /challenge/{id} shows the payment with Approve and Deny; POST /challenge/{id} with
 * `result=approve|deny` (a form, as the page posts it, or JSON: the sandbox's control shape)
 * decides it (through `decide`, which authorises or refuses the payment and sends its
 * AUTHORISATION) and sends the shopper (303) to the payment's returnUrl with `redirectResult`
 * added. A challenge decided before sends the shopper back again with the same result, changing
 * nothing; one whose payment was cancelled (the merchant's expiry) shows "expired" (410).
 */

export type ChallengeState = 'pending' | 'approved' | 'denied' | 'expired';

export interface ChallengeOf {
  /** The payment's PSP reference. */
  pspReference: string;
  merchantReference: string;
  value: number;
  currency: string;
  /** Where the shopper goes back to (the request's returnUrl). */
  returnUrl: string;
  state: ChallengeState;
  /** Issued when the challenge is decided: what the shopper brings back, for /payments/details. */
  redirectResult: string | null;
}

export interface ChallengeAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

const escape = (text: string) => text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

function page(status: number, title: string, body: string): ChallengeAnswer {
  return {
    status,
    headers: { 'Content-Type': 'text/html; charset=utf-8' },
    body: `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escape(title)}</title>
<style>body{font-family:sans-serif;max-width:28rem;margin:3rem auto;padding:0 1rem}
button{font-size:1.1rem;padding:.6rem 1.4rem;margin-right:1rem}.amount{font-size:1.6rem}</style></head>
<body><h1>${escape(title)}</h1>${body}</body></html>`,
  };
}

/** The payment's returnUrl with `redirectResult` added; null when it has none that is a URL. */
function returnLocation(challenge: ChallengeOf): string | null {
  try {
    const url = new URL(challenge.returnUrl);
    url.searchParams.set('redirectResult', challenge.redirectResult ?? '');
    return url.toString();
  } catch {
    return null;
  }
}

export class AdyenChallenges {
  /** The challenges by their id (the path of the action's url). */
  private readonly byId = new Map<string, ChallengeOf>();
  /** The decided challenges by the redirectResult they issued. */
  private readonly byResult = new Map<string, ChallengeOf>();

  constructor(private readonly decide: (challenge: ChallengeOf, result: 'approve' | 'deny') => void) {}

  /** A new challenge for the payment: the url of its page (under the double's base url) for the RedirectShopper action. */
  open(baseUrl: string, challenge: Omit<ChallengeOf, 'state' | 'redirectResult'>): string {
    const id = randomBytes(12).toString('hex');
    this.byId.set(id, { ...challenge, state: 'pending', redirectResult: null });
    return `${baseUrl}/challenge/${id}`;
  }

  /** The challenge of a payment, by its PSP reference. */
  of(pspReference: string): ChallengeOf | undefined {
    return [...this.byId.values()].find((c) => c.pspReference === pspReference);
  }

  /** The challenge that issued this redirectResult (decided), if any. */
  byRedirectResult(redirectResult: string): ChallengeOf | undefined {
    return this.byResult.get(redirectResult);
  }

  /** The merchant cancelled the payment while its challenge was open: the page says expired, and nothing can decide it any more. */
  expire(pspReference: string): boolean {
    const challenge = this.of(pspReference);
    if (!challenge || challenge.state !== 'pending') return false;
    challenge.state = 'expired';
    return true;
  }

  /** GET or POST /challenge/{id}; null for any other path. */
  handle(method: string, path: string, contentType: string | undefined, raw: string): ChallengeAnswer | null {
    const match = /^\/challenge\/([0-9a-f]{24})$/.exec(path);
    if (!match) return path.startsWith('/challenge/') ? page(404, 'No such challenge', '<p>This link is not valid.</p>') : null;
    const challenge = this.byId.get(match[1]!);
    if (!challenge) return page(404, 'No such challenge', '<p>This link is not valid.</p>');
    if (method === 'GET') return this.render(challenge);
    if (method !== 'POST') return page(405, 'Method not allowed', '<p>GET shows the challenge; POST result=approve|deny decides it.</p>');
    const result = resultOf(contentType, raw);
    if (result === null) return page(400, 'Bad request', '<p>result must be approve or deny.</p>');
    if (challenge.state === 'pending') {
      challenge.state = result === 'approve' ? 'approved' : 'denied';
      challenge.redirectResult = randomBytes(48).toString('base64url');
      this.byResult.set(challenge.redirectResult, challenge);
      this.decide(challenge, result);
    }
    const back = challenge.state === 'expired' ? null : returnLocation(challenge);
    return back ? { status: 303, headers: { Location: back, 'Content-Type': 'text/plain' }, body: '' } : this.render(challenge);
  }

  private render(challenge: ChallengeOf): ChallengeAnswer {
    if (challenge.state === 'pending') {
      return page(
        200,
        '3-D Secure authentication',
        `<p>Adyen double issuer: confirm the payment of</p>
<p class="amount" id="amount">${escape(`${(challenge.value / 100).toFixed(2)} ${challenge.currency}`)}</p>
<p>reference <code id="reference">${escape(challenge.merchantReference)}</code></p>
<form method="post">
<button type="submit" name="result" value="approve" id="approve">Approve</button>
<button type="submit" name="result" value="deny" id="deny">Deny</button>
</form>`,
      );
    }
    if (challenge.state === 'expired') return page(410, 'Authentication expired', '<p id="state" data-state="expired">This payment was canceled; there is nothing left to authenticate.</p>');
    const back = returnLocation(challenge);
    const text = challenge.state === 'denied' ? 'You denied this payment.' : 'Authentication complete.';
    return page(200, challenge.state === 'denied' ? 'Authentication failed' : 'Authentication complete', `<p id="state" data-state="${challenge.state}">${escape(text)}</p>${back ? `<p><a href="${escape(back)}">Back to the shop</a></p>` : ''}`);
  }
}

/** The posted decision: a form field or a JSON body's `result`. */
function resultOf(contentType: string | undefined, raw: string): 'approve' | 'deny' | null {
  let result: unknown;
  if ((contentType ?? '').includes('application/json')) {
    try {
      result = (JSON.parse(raw) as { result?: unknown })?.result;
    } catch {
      return null;
    }
  } else {
    result = new URLSearchParams(raw).get('result');
  }
  return result === 'approve' || result === 'deny' ? result : null;
}
