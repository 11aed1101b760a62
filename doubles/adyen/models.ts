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
  StandalonePaymentCancelRequest: ['merchantAccount', 'paymentReference'],
  PaymentRefundRequest: ['amount', 'merchantAccount'],
  PaymentDetailsRequest: ['details'],
  Amount: ['currency', 'value'],
  CardDetails: [],
  // The Disputes service's (adyenDisputeModels).
  AcceptDisputeRequest: ['disputePspReference', 'merchantAccountCode'],
  DefendDisputeRequest: ['defenseReasonCode', 'disputePspReference', 'merchantAccountCode'],
  DefenseReasonsRequest: ['disputePspReference', 'merchantAccountCode'],
  DeleteDefenseDocumentRequest: ['defenseDocumentType', 'disputePspReference', 'merchantAccountCode'],
  SupplyDefenseDocumentRequest: ['defenseDocuments', 'disputePspReference', 'merchantAccountCode'],
  DefenseDocument: ['content', 'contentType', 'defenseDocumentTypeCode'],
};

type ModelClass = { getAttributeTypeMap(): { name: string; baseName: string; type: string }[] };

/** The library's models of one API: Checkout's (`adyen.Types.checkout`, the default) or the Disputes service's (adyenDisputeModels). */
export type ModelNamespace = object;

function modelClass(name: string, models: ModelNamespace): ModelClass | null {
  const found = (models as Record<string, unknown>)[name];
  return typeof found === 'function' && typeof (found as Partial<ModelClass>).getAttributeTypeMap === 'function' ? (found as unknown as ModelClass) : null;
}

/**
 * Checks a request body against the official library's model of it, as Adyen's own parser
 * would: every field must be one the model carries (recursively, through the models its fields
 * name; a card payment method through CardDetails), and the model's required fields present.
 * Returns the first refusal, or null.
 */
export function refusalOf(body: unknown, model: string, at = '', models: ModelNamespace = adyen.Types.checkout): ModelRefusal | null {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return { errorCode: '702', message: `Structure of ${model} is not an object${at ? ` at ${at}` : ''}` };
  const clazz = modelClass(model, models);
  if (!clazz) return null;
  const attributes = new Map(clazz.getAttributeTypeMap().map((a) => [a.baseName, a.type.replace(/ \| null$/, '')]));
  const unknown = Object.keys(body).filter((key) => !attributes.has(key));
  if (unknown.length > 0) return { errorCode: '702', message: `Structure of ${model} contains the following unknown fields: [${unknown.map((k) => `${at}${k}`).join(', ')}]` };
  for (const field of required[model] ?? []) {
    const value = (body as Record<string, unknown>)[field];
    if (value === undefined || value === null) return { errorCode: '100', message: `Required field '${at}${field}' is not provided.` };
  }
  for (const [key, value] of Object.entries(body)) {
    // A list of models (`Array<DefenseDocument>`): each item is checked as one.
    const itemType = /^Array<(.+)>$/.exec(attributes.get(key)!)?.[1];
    if (Array.isArray(value) && itemType && modelClass(itemType, models)) {
      for (const [index, item] of value.entries()) {
        const refusal = refusalOf(item, itemType, `${at}${key}[${index}].`, models);
        if (refusal) return refusal;
      }
      continue;
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) continue;
    let type = attributes.get(key)!;
    // The payment method is a union the library resolves by its `type`: a card is CardDetails.
    if (type === 'PaymentRequestPaymentMethod') type = (value as { type?: unknown }).type === 'scheme' ? 'CardDetails' : type;
    const refusal = refusalOf(value, type, `${at}${key}.`, models);
    if (refusal) return refusal;
  }
  return null;
}
