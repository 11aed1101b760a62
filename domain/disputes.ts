/**
 * A dispute's lifecycle, after Stripe's Dispute (its `warning_*` statuses are our `inquiry`
 * stage), Adyen's notifications (NOTIFICATION_OF_CHARGEBACK: an inquiry; CHARGEBACK: the funds
 * withdrawn; CHARGEBACK_REVERSED: won; SECOND_CHARGEBACK: lost after all) and Hyperswitch's
 * stages (pre-dispute, dispute, pre-arbitration). Two stages, four statuses; a dispute only
 * moves forward along `disputeProgress`, so a late or reordered report never reopens one.
 */

export const disputeStages = ['inquiry', 'chargeback'] as const;
export type DisputeStage = (typeof disputeStages)[number];

export const disputeStatuses = ['needs_response', 'under_review', 'won', 'lost'] as const;
export type DisputeStatus = (typeof disputeStatuses)[number];

export const isDisputeClosed = (status: DisputeStatus): boolean => status === 'won' || status === 'lost';

/**
 * Where a dispute stands, as a number that only grows: an inquiry waiting (0) or under review
 * (1), a chargeback waiting (2) or under review (3), closed (4). An inquiry that escalates
 * moves forward; nothing moves a closed dispute.
 */
export function disputeProgress(d: { stage: DisputeStage; status: DisputeStatus }): number {
  if (isDisputeClosed(d.status)) return 4;
  return (d.stage === 'chargeback' ? 2 : 0) + (d.status === 'under_review' ? 1 : 0);
}

/** Whether a report of `next` moves a dispute that stands at `current` (equal standing: no). */
export const disputeMovesForward = (current: { stage: DisputeStage; status: DisputeStatus }, next: { stage: DisputeStage; status: DisputeStatus }): boolean =>
  disputeProgress(next) > disputeProgress(current);
