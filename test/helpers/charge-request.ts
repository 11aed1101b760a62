import { randomBytes } from 'node:crypto';
import type { CreateChargeRequest } from '../../provider/types';

/** A name no other test uses (the sandbox's tables are shared by a file's tests). */
export const unique = (prefix: string) => `${prefix}_${randomBytes(6).toString('hex')}`;

/** A pm_card_visa charge of 25.00 EUR under fresh keys, with the given changes. */
export function chargeRequest(overrides: Partial<CreateChargeRequest> = {}): CreateChargeRequest {
  return {
    idempotencyKey: unique('key'),
    amountMinor: 2_500,
    currency: 'EUR',
    paymentMethod: 'pm_card_visa',
    capture: true,
    reference: unique('pay'),
    ...overrides,
  };
}
