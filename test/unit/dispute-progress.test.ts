import { describe, expect, it } from 'vitest';
import { disputeMovesForward, disputeStages, disputeStatuses, type DisputeStage, type DisputeStatus } from '../../domain/disputes';

type Standing = { stage: DisputeStage; status: DisputeStatus };
const at = (stage: DisputeStage, status: DisputeStatus): Standing => ({ stage, status });
const every: Standing[] = disputeStages.flatMap((stage) => disputeStatuses.map((status) => at(stage, status)));

describe('a dispute moves only forward (domain/disputes.ts)', () => {
  it('an inquiry escalates to a chargeback, and a chargeback is decided', () => {
    expect(disputeMovesForward(at('inquiry', 'needs_response'), at('chargeback', 'needs_response'))).toBe(true);
    expect(disputeMovesForward(at('chargeback', 'under_review'), at('chargeback', 'won'))).toBe(true);
    expect(disputeMovesForward(at('chargeback', 'won'), at('chargeback', 'under_review'))).toBe(false);
  });

  it('a chargeback closed won moves on to the second round, and one closed lost does too (SECOND_CHARGEBACK after a lost webhook)', () => {
    expect(disputeMovesForward(at('chargeback', 'won'), at('pre_arbitration', 'lost'))).toBe(true);
    expect(disputeMovesForward(at('chargeback', 'lost'), at('pre_arbitration', 'lost'))).toBe(true);
    expect(disputeMovesForward(at('chargeback', 'won'), at('pre_arbitration', 'won'))).toBe(true);
  });

  it('nothing moves a closed second round: a reversal delivered after it, or another decision of it', () => {
    for (const closed of [at('pre_arbitration', 'lost'), at('pre_arbitration', 'won')]) {
      for (const next of every) expect(disputeMovesForward(closed, next), `${closed.stage} ${closed.status} -> ${next.stage} ${next.status}`).toBe(false);
    }
  });

  it('no standing moves to itself, and the order is total: of two different standings exactly one may follow the other, or they are both closed at one stage', () => {
    for (const a of every) {
      expect(disputeMovesForward(a, a)).toBe(false);
      for (const b of every) {
        if (a === b) continue;
        const closedAlike = a.stage === b.stage && ['won', 'lost'].includes(a.status) && ['won', 'lost'].includes(b.status);
        const inquiryClosed = [a, b].every((s) => ['won', 'lost'].includes(s.status) && s.stage !== 'pre_arbitration');
        if (closedAlike || inquiryClosed) expect(disputeMovesForward(a, b) || disputeMovesForward(b, a)).toBe(false);
        else expect(disputeMovesForward(a, b) !== disputeMovesForward(b, a)).toBe(true);
      }
    }
  });
});
