import type { Types } from '@adyen/api-library';
import { adyen, adyenDisputeModels } from '../../provider/adyen/library';
import { evidenceWins } from '../../sandbox/disputes';
import { refusalOf } from './models';
import type { NotificationOutbox } from './notifications';

type NotificationRequestItem = Types.notification.NotificationRequestItem;
const { EventCodeEnum, SuccessEnum } = adyen.Types.notification.NotificationRequestItem;

/** The holder name (the double's own) whose captured payment is disputed: `pm_card_createDispute` (provider/adyen/wire.ts adyenTestCards). */
export const DISPUTED_HOLDER_NAME = 'CHARGEBACK';

/** The one defence reason the double applies to its disputes, and the document it requires (Adyen's generic defence material). */
const DEFENSE_REASON = 'SupplyDefenseMaterial';
const DEFENSE_DOCUMENT = 'DefenseMaterial';
/** The scheme's reason code the double's disputes carry (Visa's 10.4, fraud in a card-absent environment), as the sandbox's are `fraudulent`. */
const REASON_CODE = '10.4';

/**
 * One money movement of a dispute at the double, as Adyen's settlement details report books it
 * (its record types): `Chargeback` debits the disputed amount (negative), `ChargebackReversed`
 * gives it back (positive), `SecondChargeback` debits again what a reversal gave back (negative).
 */
export interface DisputeMoneyMovement {
  type: 'Chargeback' | 'ChargebackReversed' | 'SecondChargeback';
  /** The dispute's PSP reference (every notification of the dispute carries it). */
  pspReference: string;
  /** The disputed payment's PSP reference. */
  originalReference: string;
  /** The payment's merchant reference (our payment id). */
  merchantReference: string;
  currency: string;
  /** Signed, in minor units: negative debits the merchant. */
  amountMinor: number;
  /** When it was booked (ISO 8601). */
  bookedAt: string;
}

/** A captured payment, as the dispute needs it. */
export interface DisputablePayment {
  pspReference: string;
  merchantReference: string;
  currency: string;
  holderName: string;
  capturedMinor: number;
  refundedMinor: number;
}

export interface DoubleDisputeOptions {
  /** How long after its capture a disputed payment's dispute opens; default 50 ms. */
  openAfterMs?: number;
  /** How long a defence waits for the network's decision; default 200 ms. */
  decisionMs?: number;
  /** The defence period: past it an undefended dispute is lost (DISPUTE_DEFENSE_PERIOD_ENDED); default 7 days. */
  defenseWindowMs?: number;
}

interface HeldDispute {
  pspReference: string;
  payment: DisputablePayment;
  amountMinor: number;
  defenseEndsAt: Date;
  /** `open`: defendable; `defended`: waiting for the decision; the rest are closed. */
  state: 'open' | 'defended' | 'won' | 'lost' | 'accepted' | 'expired';
  /** The defence documents supplied, by document type. */
  documents: Map<string, { contentType: string; content: string }>;
  /** The payment was refunded in full before the dispute opened: a defence wins (the sandbox's rule). */
  creditedBefore: boolean;
  /** What a ChargebackReversed gave back (a SecondChargeback debits it again). */
  reversedMinor: number;
}

type Answer = { status: number; body: unknown };

/** The Disputes service's operations and the library's model of each request. */
const operations: Readonly<Record<string, string>> = {
  acceptDispute: 'AcceptDisputeRequest',
  defendDispute: 'DefendDisputeRequest',
  deleteDisputeDefenseDocument: 'DeleteDefenseDocumentRequest',
  retrieveApplicableDefenseReasons: 'DefenseReasonsRequest',
  supplyDefenseDocument: 'SupplyDefenseDocumentRequest',
};

/** Where the double serves the Disputes service (a connection's `disputesUrl` is the double's URL with it). */
export const DISPUTES_PATH = '/ca/services/DisputeService';
const operationPath = /^\/ca\/services\/DisputeService\/v\d+\/([A-Za-z]+)$/;

/**
 * Adyen's dispute side, in the double. A captured payment of the card held by `CHARGEBACK` is
 * disputed `openAfterMs` later, for its captured amount: NOTIFICATION_OF_CHARGEBACK (the
 * dispute opened, defendable, no money moved), then CHARGEBACK (the amount debited), each signed
 * and batched through the NotificationOutbox with its faults, each carrying Adyen's
 * additionalData (defensePeriodEndsAt, chargebackReasonCode, disputeStatus). The Disputes
 * service (under DISPUTES_PATH; every body checked with the library's model, replayed by
 * Idempotency-Key by the server): retrieveApplicableDefenseReasons (one reason,
 * SupplyDefenseMaterial, requiring a DefenseMaterial document), supplyDefenseDocument and
 * deleteDisputeDefenseDocument (while the dispute is defendable), defendDispute (with the
 * required document supplied), acceptDispute (the dispute lost, DISPUTE_DEFENSE_PERIOD_ENDED
 * with disputeStatus Accepted). A refusal of the dispute's state is Adyen's answer with
 * `disputeServiceResult.success` false.
 *
 * The decision, `decisionMs` after a defence, mirrors the sandbox's (sandbox/disputes.ts
 * evidenceWins): the documents' text holding `winning_evidence` and not `losing_evidence` wins,
 * as does any defence of a payment refunded in full before the dispute opened. Either way the
 * defence first reverses the chargeback (CHARGEBACK_REVERSED, the amount given back; Adyen's
 * disputeStatus Won, or Pending while the issuer may still decline); a loss is then the issuer's
 * SECOND_CHARGEBACK (the amount debited again, disputeStatus Lost), `decisionMs` after the
 * reversal. An undefended dispute is lost at the end of its defence period
 * (DISPUTE_DEFENSE_PERIOD_ENDED, Expired). Every money movement is kept in `movements`, for a
 * settlement report.
 */
export class DoubleDisputes {
  readonly movements: DisputeMoneyMovement[] = [];
  private readonly disputes = new Map<string, HeldDispute>();
  private readonly disputed = new Set<string>();

  constructor(
    private readonly deps: {
      merchantAccount: string;
      outbox: NotificationOutbox;
      later: (ms: number, run: () => void) => void;
      pspReference: () => string;
      options: DoubleDisputeOptions;
      /** Each money movement as it is made (the server books it in its settlement batch). */
      onMovement?: (movement: DisputeMoneyMovement) => void;
    },
  ) {}

  /** A payment's capture was confirmed: the disputing card's payment is disputed (once). */
  captured(payment: DisputablePayment): void {
    if (payment.holderName !== DISPUTED_HOLDER_NAME || payment.capturedMinor <= 0 || this.disputed.has(payment.pspReference)) return;
    this.disputed.add(payment.pspReference);
    this.deps.later(this.deps.options.openAfterMs ?? 50, () => this.open(payment));
  }

  /** Whether a path is the Disputes service's. */
  serves(path: string): boolean {
    return path.startsWith(`${DISPUTES_PATH}/`);
  }

  /** One call of the Disputes service (a POST whose body is parsed JSON). */
  handle(path: string, body: unknown): Answer {
    const operation = operationPath.exec(path)?.[1];
    const model = operation ? operations[operation] : undefined;
    if (!operation || !model) return error(404, '000', `No such endpoint ${path}`);
    const refusal = refusalOf(body, model, '', adyenDisputeModels);
    if (refusal) return error(refusal.errorCode === '702' ? 400 : 422, refusal.errorCode, refusal.message);
    const request = body as { disputePspReference: string; merchantAccountCode: string };
    if (request.merchantAccountCode !== this.deps.merchantAccount) return error(403, '901', 'Invalid Merchant Account', 'security');
    const dispute = this.disputes.get(request.disputePspReference);
    if (!dispute) return result(false, 'Dispute not found');
    switch (operation) {
      case 'retrieveApplicableDefenseReasons':
        return this.reasons(dispute);
      case 'supplyDefenseDocument':
        return this.supply(dispute, (body as { defenseDocuments: { defenseDocumentTypeCode: string; contentType: string; content: string }[] }).defenseDocuments);
      case 'deleteDisputeDefenseDocument':
        return this.deleteDocument(dispute, (body as { defenseDocumentType: string }).defenseDocumentType);
      case 'defendDispute':
        return this.defend(dispute, (body as { defenseReasonCode: string }).defenseReasonCode);
      default:
        return this.accept(dispute);
    }
  }

  close(): void {
    this.disputes.clear();
  }

  private open(payment: DisputablePayment): void {
    const dispute: HeldDispute = {
      pspReference: this.deps.pspReference(),
      payment,
      amountMinor: payment.capturedMinor,
      defenseEndsAt: new Date(Date.now() + (this.deps.options.defenseWindowMs ?? 7 * 24 * 3600 * 1000)),
      state: 'open',
      documents: new Map(),
      creditedBefore: payment.refundedMinor >= payment.capturedMinor,
      reversedMinor: 0,
    };
    this.disputes.set(dispute.pspReference, dispute);
    this.notify(dispute, EventCodeEnum.NotificationOfChargeback, 'Undefended');
    this.move(dispute, 'Chargeback', -dispute.amountMinor);
    this.notify(dispute, EventCodeEnum.Chargeback, 'Undefended');
    this.deps.later(dispute.defenseEndsAt.getTime() - Date.now(), () => {
      if (dispute.state !== 'open') return;
      dispute.state = 'expired';
      this.notify(dispute, EventCodeEnum.DisputeDefensePeriodEnded, 'Expired');
    });
  }

  private reasons(dispute: HeldDispute): Answer {
    if (dispute.state !== 'open') return result(false, 'Dispute is not defendable');
    const supplied = dispute.documents.has(DEFENSE_DOCUMENT);
    return {
      status: 200,
      body: {
        defenseReasons: [{ defenseReasonCode: DEFENSE_REASON, satisfied: supplied, defenseDocumentTypes: [{ defenseDocumentTypeCode: DEFENSE_DOCUMENT, available: supplied, requirementLevel: 'Required' }] }],
        disputeServiceResult: { success: true },
      },
    };
  }

  private supply(dispute: HeldDispute, documents: { defenseDocumentTypeCode: string; contentType: string; content: string }[]): Answer {
    if (dispute.state !== 'open') return result(false, 'Dispute is not defendable');
    for (const document of documents) {
      if (!['application/pdf', 'image/jpeg', 'image/tiff'].includes(document.contentType)) return result(false, `Content type ${document.contentType} is not supported`);
      if (document.defenseDocumentTypeCode !== DEFENSE_DOCUMENT) return result(false, `Document type ${document.defenseDocumentTypeCode} is not applicable`);
    }
    for (const document of documents) dispute.documents.set(document.defenseDocumentTypeCode, { contentType: document.contentType, content: document.content });
    return result(true);
  }

  private deleteDocument(dispute: HeldDispute, type: string): Answer {
    if (dispute.state !== 'open') return result(false, 'Dispute is not defendable');
    return dispute.documents.delete(type) ? result(true) : result(false, `No document of type ${type}`);
  }

  private defend(dispute: HeldDispute, reason: string): Answer {
    if (dispute.state !== 'open') return result(false, 'Dispute is not defendable');
    if (reason !== DEFENSE_REASON) return result(false, `Defense reason ${reason} is not applicable`);
    if (!dispute.documents.has(DEFENSE_DOCUMENT)) return result(false, `Required document ${DEFENSE_DOCUMENT} is missing`);
    dispute.state = 'defended';
    this.deps.later(this.deps.options.decisionMs ?? 200, () => this.decide(dispute));
    return result(true);
  }

  private accept(dispute: HeldDispute): Answer {
    if (dispute.state !== 'open') return result(false, 'Dispute cannot be accepted');
    dispute.state = 'accepted';
    this.notify(dispute, EventCodeEnum.DisputeDefensePeriodEnded, 'Accepted');
    return result(true);
  }

  /** The network's decision on a defence, by the sandbox's rule. */
  private decide(dispute: HeldDispute): void {
    const text = [...dispute.documents.values()].map((d) => Buffer.from(d.content, 'base64').toString('latin1')).join('\n');
    const wins = evidenceWins({ uncategorized_text: text }) || dispute.creditedBefore;
    dispute.state = wins ? 'won' : 'lost';
    // The defence reverses the chargeback at once; an issuer that declines it charges back again.
    dispute.reversedMinor = dispute.amountMinor;
    this.move(dispute, 'ChargebackReversed', dispute.amountMinor);
    this.notify(dispute, EventCodeEnum.ChargebackReversed, wins ? 'Won' : 'Pending');
    if (!wins) {
      this.deps.later(this.deps.options.decisionMs ?? 200, () => {
        this.move(dispute, 'SecondChargeback', -dispute.reversedMinor);
        this.notify(dispute, EventCodeEnum.SecondChargeback, 'Lost');
      });
    }
  }

  private move(dispute: HeldDispute, type: DisputeMoneyMovement['type'], amountMinor: number): void {
    const { payment } = dispute;
    const movement: DisputeMoneyMovement = { type, pspReference: dispute.pspReference, originalReference: payment.pspReference, merchantReference: payment.merchantReference, currency: payment.currency, amountMinor, bookedAt: new Date().toISOString() };
    this.movements.push(movement);
    this.deps.onMovement?.(movement);
  }

  /** One dispute notification, as Adyen sends it: the dispute's reference, the payment's as originalReference. */
  private notify(dispute: HeldDispute, eventCode: NotificationRequestItem['eventCode'], disputeStatus: string): void {
    const { payment } = dispute;
    this.deps.outbox.add({
      additionalData: { defensePeriodEndsAt: dispute.defenseEndsAt.toISOString(), chargebackReasonCode: REASON_CODE, chargebackSchemeCode: 'visa', disputeStatus },
      amount: { currency: payment.currency, value: dispute.amountMinor },
      eventCode,
      eventDate: new Date().toISOString(),
      merchantAccountCode: this.deps.merchantAccount,
      merchantReference: payment.merchantReference,
      pspReference: dispute.pspReference,
      originalReference: payment.pspReference,
      paymentMethod: 'visa',
      reason: 'Fraud - card absent environment',
      success: SuccessEnum.True,
    });
  }
}

const result = (success: boolean, errorMessage?: string): Answer => ({ status: 200, body: { disputeServiceResult: { success, ...(errorMessage ? { errorMessage } : {}) } } });
const error = (status: number, errorCode: string, message: string, errorType = 'validation'): Answer => ({ status, body: { status, errorCode, message, errorType } });
