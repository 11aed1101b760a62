import { randomBytes } from 'node:crypto';
import { adyenTestCards } from '../../provider/adyen/wire';
import { issueNetworkTransactionId } from '../../sandbox/network';

/**
 * The Adyen double on the sandboxes' card network (sandbox/network.ts): given the network's key
 * (SANDBOX_NETWORK_KEY, the same the sandboxes are given), the network transaction id it answers
 * for an authorised card (`additionalData.networkTxReference`) is one the network issued for the
 * test card charged, so a sandbox on the network charges that card by it (a card saved at Adyen,
 * charged at sandbox-b when Adyen cannot be reached). The test card is the one of our test payment
 * methods whose Adyen card (number and holder name, provider/adyen/wire.ts adyenTestCards) was
 * charged; the id carries the number's last four digits, which the charge by the id names.
 *
 * A card number that stands for none of them is a card outside the test network: it gets an id
 * of the double's own (15 digits) that no sandbox knows.
 */
export function networkTxReference(networkKey: string, card: { number: string; holderName: string }): string {
  const name = testPaymentMethodOf(card);
  if (name !== null) return issueNetworkTransactionId(networkKey, name, card.number.slice(-4));
  return String(100_000_000_000_000 + (randomBytes(6).readUIntBE(0, 6) % 900_000_000_000_000));
}

/** Our test payment method an Adyen test card stands for (the first listed with its number and holder name); null for none. */
export function testPaymentMethodOf(card: { number: string; holderName: string }): string | null {
  const found = Object.entries(adyenTestCards).find(([, listed]) => listed.number === card.number && listed.holderName === card.holderName);
  return found ? found[0] : null;
}
