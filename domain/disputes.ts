/**
 * A dispute's lifecycle, after the card PSPs' disputes and notifications (an inquiry before any
 * funds move; a chargeback that withdraws them; a reversal that is won, but not for good; the
 * issuer's second round, pre-arbitration) and Hyperswitch's stages (pre-dispute, dispute,
 * pre-arbitration); each kind maps its own words to these (provider/<kind>/wire.ts). Three stages, four statuses; a dispute only moves forward along
 * `disputeProgress`, so a late or reordered report never reopens one. A chargeback closed won
 * can still move on to `pre_arbitration`, the network's second round, which is always last.
 */

export const disputeStages = ['inquiry', 'chargeback', 'pre_arbitration'] as const;
export type DisputeStage = (typeof disputeStages)[number];

export const disputeStatuses = ['needs_response', 'under_review', 'won', 'lost'] as const;
export type DisputeStatus = (typeof disputeStatuses)[number];

export const isDisputeClosed = (status: DisputeStatus): boolean => status === 'won' || status === 'lost';

/**
 * Where a dispute stands, as a number that only grows: an inquiry waiting (0) or under review
 * (1), a chargeback waiting (2) or under review (3), an inquiry or chargeback closed (4), a
 * pre-arbitration waiting (5), under review (6) or closed (7). An inquiry that escalates moves
 * forward, and so does a closed chargeback the network takes to a second round; nothing moves a
 * closed pre-arbitration, nor a closed dispute back to a first round.
 */
export function disputeProgress(d: { stage: DisputeStage; status: DisputeStatus }): number {
  const within = isDisputeClosed(d.status) ? 2 : d.status === 'under_review' ? 1 : 0;
  if (d.stage === 'pre_arbitration') return 5 + within;
  return isDisputeClosed(d.status) ? 4 : (d.stage === 'chargeback' ? 2 : 0) + within;
}

/** Whether the dispute's stage withdrew the funds (a chargeback, or its second round). */
export const withdrawsFunds = (stage: DisputeStage): boolean => stage !== 'inquiry';

/** Whether a report of `next` moves a dispute that stands at `current` (equal standing: no). */
export const disputeMovesForward = (current: { stage: DisputeStage; status: DisputeStatus }, next: { stage: DisputeStage; status: DisputeStatus }): boolean =>
  disputeProgress(next) > disputeProgress(current);
