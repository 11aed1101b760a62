import { adyen } from '../../provider/adyen/library';

/** A field of a request that the official library's model does not carry, or one it requires and is missing. */
export interface ModelRefusal {
  /** Adyen's error code: 702 for an unknown field (its parser refuses the structure), 100 for a required one missing. */
  errorCode: '702' | '100';
  message: string;
}

/** What each request model requires (the library's typings mark them; its runtime models do not say). */
const required: Readonly<Record<string, readonly string[]>> = {
  PaymentRequest: ['amount', 'merchantAccount', 'paymentMethod', 'reference', 'returnUrl'],
  PaymentCaptureRequest: ['amount', 'merchantAccount'],
  PaymentCancelRequest: ['merchantAccount'],
  PaymentRefundRequest: ['amount', 'merchantAccount'],
  Amount: ['currency', 'value'],
  CardDetails: [],
};

type ModelClass = { getAttributeTypeMap(): { name: string; baseName: string; type: string }[] };

function modelClass(name: string): ModelClass | null {
  const found = (adyen.Types.checkout as unknown as Record<string, unknown>)[name];
  return typeof found === 'function' && typeof (found as Partial<ModelClass>).getAttributeTypeMap === 'function' ? (found as unknown as ModelClass) : null;
}

/**
 * Checks a request body against the official library's model of it, as Adyen's own parser
 * would: every field must be one the model carries (recursively, through the models its fields
 * name; a card payment method through CardDetails), and the model's required fields present.
 * Returns the first refusal, or null.
 */
export function refusalOf(body: unknown, model: string, at = ''): ModelRefusal | null {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return { errorCode: '702', message: `Structure of ${model} is not an object${at ? ` at ${at}` : ''}` };
  const clazz = modelClass(model);
  if (!clazz) return null;
  const attributes = new Map(clazz.getAttributeTypeMap().map((a) => [a.baseName, a.type.replace(/ \| null$/, '')]));
  const unknown = Object.keys(body).filter((key) => !attributes.has(key));
  if (unknown.length > 0) return { errorCode: '702', message: `Structure of ${model} contains the following unknown fields: [${unknown.map((k) => `${at}${k}`).join(', ')}]` };
  for (const field of required[model] ?? []) {
    const value = (body as Record<string, unknown>)[field];
    if (value === undefined || value === null) return { errorCode: '100', message: `Required field '${at}${field}' is not provided.` };
  }
  for (const [key, value] of Object.entries(body)) {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) continue;
    let type = attributes.get(key)!;
    // The payment method is a union the library resolves by its `type`: a card is CardDetails.
    if (type === 'PaymentRequestPaymentMethod') type = (value as { type?: unknown }).type === 'scheme' ? 'CardDetails' : type;
    const refusal = refusalOf(value, type, `${at}${key}.`);
    if (refusal) return refusal;
  }
  return null;
}
