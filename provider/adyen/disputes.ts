import type { DisputesAPI } from '@adyen/api-library';
import type { DefenseReason, DisputeServiceResult } from '@adyen/api-library/lib/src/typings/disputes/models';
import { ProviderRejectedError, type CallOptions, type CloseDisputeRequest, type DisputeEvidence, type DisputeProvider, type ProviderDispute, type UpdateDisputeRequest } from '../types';

/** Adyen's test Disputes service: a connection's `disputesUrl` when it names none. */
export const ADYEN_TEST_DISPUTES_URL = 'https://ca-test.adyen.com/ca/services/DisputeService';

/** The document type our evidence goes as when the defence reason names none (Adyen's generic defence material). */
const DEFAULT_DOCUMENT_TYPE = 'DefenseMaterial';

/** What Adyen cannot do that a `retrieval` kind does: refused for good, so a step that asked would end rather than retry. */
const unsupported = (what: string) =>
  Promise.reject(new ProviderRejectedError(`adyen: the Disputes API has no ${what}; a dispute is known by its signed notifications (disputeSource: notification)`, 405, 'dispute_read_unsupported'));

/**
 * Adyen's disputes through the official library's DisputesAPI (the Disputes service, its own
 * base URL). Adyen answers commands about a dispute, never the dispute itself: there is no
 * retrieval, no list and no read of the documents supplied, so those refuse (the kind's
 * disputeSource is `notification`: no step calls them). A command's answer is the dispute as
 * we recorded it (the request's `recorded`), moved on as the command moves it; the
 * notifications that follow (CHARGEBACK_REVERSED, SECOND_CHARGEBACK, …) say the rest.
 *
 * Evidence: Adyen's defence is a defence reason with documents. The dispute's applicable
 * reasons are read (retrieveApplicableDefenseReasons), the first one taken; the evidence's
 * fields (`field: value`, one a line) are supplied as one PDF document of the document type
 * that reason requires (supplyDefenseDocument, replacing the one an earlier request supplied);
 * a submission then defends the dispute with that reason (defendDispute). Acceptance is
 * acceptDispute. Each call is sent under its own key derived from the command's, so a retry
 * is replayed by Adyen; an answer with `disputeServiceResult.success` false (a dispute no
 * longer defendable, decided or unknown) is a ProviderRejectedError.
 */
export class AdyenDisputes implements DisputeProvider {
  constructor(private readonly api: DisputesAPI, private readonly merchantAccount: string) {}

  retrieveDispute(): Promise<ProviderDispute> {
    return unsupported('retrieval of a dispute');
  }

  listDisputes(): Promise<{ data: ProviderDispute[]; hasMore: boolean }> {
    return unsupported('list of disputes');
  }

  retrieveEvidence(): Promise<Record<string, string>> {
    return unsupported('read of the documents supplied');
  }

  async updateDispute(request: UpdateDisputeRequest, options?: CallOptions): Promise<ProviderDispute> {
    const recorded = recordedOf(request);
    const dispute = { disputePspReference: request.disputeId, merchantAccountCode: this.merchantAccount };
    const reasons = await this.api.DisputesApi.retrieveApplicableDefenseReasons(dispute, this.options(null, options));
    answered(reasons.disputeServiceResult, request.disputeId);
    const reason: DefenseReason | undefined = reasons.defenseReasons?.[0];
    if (!reason) throw new ProviderRejectedError(`adyen: dispute ${request.disputeId} has no applicable defence reason: it cannot be defended`, 422, 'dispute_not_defendable');
    const documentType =
      reason.defenseDocumentTypes?.find((type) => type.requirementLevel === 'Required')?.defenseDocumentTypeCode ?? reason.defenseDocumentTypes?.[0]?.defenseDocumentTypeCode ?? DEFAULT_DOCUMENT_TYPE;
    const supplied = await this.api.DisputesApi.supplyDefenseDocument(
      { ...dispute, defenseDocuments: [{ defenseDocumentTypeCode: documentType, contentType: 'application/pdf', content: evidencePdf(request.evidence).toString('base64') }] },
      this.options(`${request.idempotencyKey}:document`, options),
    );
    answered(supplied.disputeServiceResult, request.disputeId);
    if (!request.submit) return recorded;
    const defended = await this.api.DisputesApi.defendDispute({ ...dispute, defenseReasonCode: reason.defenseReasonCode }, this.options(`${request.idempotencyKey}:defend`, options));
    answered(defended.disputeServiceResult, request.disputeId);
    return { ...recorded, status: 'under_review', evidenceSubmittedAt: recorded.evidenceSubmittedAt ?? new Date().toISOString() };
  }

  async closeDispute(request: CloseDisputeRequest, options?: CallOptions): Promise<ProviderDispute> {
    const recorded = recordedOf(request);
    const accepted = await this.api.DisputesApi.acceptDispute({ disputePspReference: request.disputeId, merchantAccountCode: this.merchantAccount }, this.options(request.idempotencyKey, options));
    answered(accepted.disputeServiceResult, request.disputeId);
    return { ...recorded, status: 'lost' };
  }

  private options(idempotencyKey: string | null, options?: CallOptions) {
    return { ...(idempotencyKey ? { idempotencyKey } : {}), ...(options?.signal ? { signal: options.signal } : {}) };
  }
}

function recordedOf(request: { disputeId: string; recorded?: ProviderDispute }): ProviderDispute {
  if (!request.recorded) throw new Error(`adyen: a command on dispute ${request.disputeId} needs the dispute as recorded (Adyen's answer does not carry it)`);
  return request.recorded;
}

/** Adyen's word on a command: `success` false (the dispute is not open to it, or unknown) is a refusal. */
function answered(result: DisputeServiceResult | undefined, disputeId: string): void {
  if (result?.success) return;
  throw new ProviderRejectedError(`adyen: dispute ${disputeId}: ${result?.errorMessage ?? 'the Disputes service did not succeed'}`, 422, 'dispute_not_open');
}

/** PDF's string literal: Latin-1, with its delimiters escaped (anything else becomes `?`). */
const pdfText = (text: string) => text.replace(/[^\x20-\x7e\xa0-\xff]/g, '?').replace(/[\\()]/g, (c) => `\\${c}`);

/**
 * The evidence as a one-page PDF (what Adyen's defence documents are): each field `name: value`,
 * one line each (a value's own lines too), in Helvetica, uncompressed.
 */
export function evidencePdf(evidence: DisputeEvidence): Buffer {
  const lines = Object.entries(evidence).flatMap(([field, value]) => `${field}: ${value}`.split(/\r?\n/));
  const content = `BT /F1 10 Tf 12 TL 40 800 Td ${lines.map((line) => `(${pdfText(line)}) Tj T*`).join(' ')} ET`;
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>',
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
    `<< /Length ${Buffer.byteLength(content, 'latin1')} >>\nstream\n${content}\nendstream`,
  ];
  let pdf = '%PDF-1.4\n';
  const offsets = objects.map((object, index) => {
    const offset = Buffer.byteLength(pdf, 'latin1');
    pdf += `${index + 1} 0 obj\n${object}\nendobj\n`;
    return offset;
  });
  const xref = Buffer.byteLength(pdf, 'latin1');
  pdf += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n${offsets.map((o) => `${String(o).padStart(10, '0')} 00000 n \n`).join('')}`;
  pdf += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(pdf, 'latin1');
}
