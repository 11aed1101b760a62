import { Hono } from 'hono';
import { z } from 'zod';
import { invalidRequest, notFound } from '../errors';
import { disputeEvent } from '../effects';
import { closeDispute, escalate } from '../disputes';
import { parseJsonBody, parseParams, requireIdempotencyKey, sendStored } from '../http';
import { requestFingerprint, runIdempotently, type Tx } from '../idempotency';
import { disputeJson, type ChargeRow, type DisputeRow } from '../objects';
import type { SandboxDeps } from '../deps';

/**
 * The disputes the card network raised against the sandbox's charges, after the card PSPs' APIs:
 * GET /v1/disputes (oldest first, `charge` filter, `starting_after` + `limit` pages),
 * GET /v1/disputes/{id}, POST /v1/disputes/{id} (stage evidence; `submit: true` sends it for the
 * network's decision) and POST /v1/disputes/{id}/close (accept: the dispute is lost).
 */

/** A card PSP's evidence is a set of named text fields; here any snake_case name up to 50 of them. */
const evidence = z
  .record(z.string().regex(/^[a-z][a-z0-9_]{0,63}$/, 'must be a snake_case field name'), z.string().max(20_000))
  .refine((e) => Object.keys(e).length <= 50, 'at most 50 fields');

const updateDisputeBody = z.strictObject({
  evidence: evidence.optional(),
  submit: z.boolean().default(false),
});

const closeDisputeBody = z.strictObject({});

const listDisputesQuery = z.strictObject({
  charge: z.string().min(1).max(255).optional(),
  starting_after: z.string().min(1).max(255).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(10),
});

type DisputeWithReference = DisputeRow & { reference: string; seq: string };

async function lockDispute(tx: Tx, id: string): Promise<DisputeRow & { reference: string }> {
  const [row] = await tx<(DisputeRow & { reference: string })[]>`
    SELECT d.*, c.reference FROM sandbox.disputes d JOIN sandbox.charges c ON c.id = d.charge_id
    WHERE d.id = ${id} FOR UPDATE OF d`;
  if (!row) throw notFound('dispute', id);
  return row;
}

/** Evidence is taken only while the dispute needs a response and its deadline has not passed. */
function refuseClosedForEvidence(row: DisputeRow, action: string): void {
  if (row.status !== 'needs_response') {
    throw invalidRequest('dispute_not_open', `Dispute ${row.id} has status '${row.status}'; only a 'needs_response' dispute can be ${action}.`);
  }
  if (row.evidence_due_by.getTime() <= Date.now()) {
    throw invalidRequest('evidence_deadline_passed', `The evidence for dispute ${row.id} was due by ${row.evidence_due_by.toISOString()}.`);
  }
}

export function disputeRoutes(deps: SandboxDeps) {
  const { sql, config } = deps;
  return new Hono()
    .get('/', async (c) => {
      const q = parseParams(listDisputesQuery, c.req.query());
      let afterSeq = '0';
      if (q.starting_after !== undefined) {
        const [cursor] = await sql<{ seq: string }[]>`SELECT seq FROM sandbox.disputes WHERE id = ${q.starting_after}`;
        if (!cursor) throw invalidRequest('resource_missing', `No such dispute: '${q.starting_after}'`);
        afterSeq = cursor.seq;
      }
      const rows = await sql<DisputeWithReference[]>`
        SELECT d.*, c.reference FROM sandbox.disputes d JOIN sandbox.charges c ON c.id = d.charge_id
        WHERE d.seq > ${afterSeq} ${q.charge !== undefined ? sql`AND d.charge_id = ${q.charge}` : sql``}
        ORDER BY d.seq
        LIMIT ${q.limit + 1}`;
      return c.json({ object: 'list', data: rows.slice(0, q.limit).map((r) => disputeJson(r, r)), has_more: rows.length > q.limit });
    })

    .get('/:id', async (c) => {
      const id = c.req.param('id');
      const [row] = await sql<DisputeWithReference[]>`
        SELECT d.*, c.reference FROM sandbox.disputes d JOIN sandbox.charges c ON c.id = d.charge_id WHERE d.id = ${id}`;
      if (!row) throw notFound('dispute', id);
      return c.json(disputeJson(row, row));
    })

    .post('/:id', async (c) => {
      const key = requireIdempotencyKey(c);
      const params = await parseJsonBody(c, updateDisputeBody);
      const id = c.req.param('id');
      const scope = { endpoint: 'POST /v1/disputes/:id', key, fingerprint: requestFingerprint({ dispute: id, ...params }), ttlSeconds: config.idempotencyKeyTtlSeconds };
      const stored = await runIdempotently(sql, scope, async (tx) => {
        const open = await lockDispute(tx, id);
        refuseClosedForEvidence(open, params.submit ? 'submitted' : 'given evidence');
        const merged = { ...open.evidence, ...params.evidence };
        const [row] = await tx<DisputeRow[]>`
          UPDATE sandbox.disputes
          SET evidence = ${tx.json(merged)},
              status = ${params.submit ? 'under_review' : 'needs_response'},
              evidence_submitted_at = ${params.submit ? sql`clock_timestamp()` : null},
              decide_at = ${params.submit ? sql`clock_timestamp() + ${config.disputeDecisionMs}::bigint * interval '1 millisecond'` : null},
              updated_at = clock_timestamp()
          WHERE id = ${id} RETURNING *`;
        await disputeEvent(tx, deps, 'charge.dispute.updated', row!, open);
        return { status: 200, body: disputeJson(row!, open) };
      });
      return sendStored(c, stored);
    })

    .post('/:id/close', async (c) => {
      const key = requireIdempotencyKey(c);
      const params = await parseJsonBody(c, closeDisputeBody);
      const id = c.req.param('id');
      const scope = { endpoint: 'POST /v1/disputes/:id/close', key, fingerprint: requestFingerprint({ dispute: id, ...params }), ttlSeconds: config.idempotencyKeyTtlSeconds };
      const stored = await runIdempotently(sql, scope, async (tx) => {
        const open = await lockDispute(tx, id);
        if (open.status !== 'needs_response') {
          throw invalidRequest('dispute_not_open', `Dispute ${id} has status '${open.status}'; only a 'needs_response' dispute can be closed.`);
        }
        // Conceding an inquiry concedes the money: it becomes a chargeback (withdrawn), then lost.
        const closed = await closeDispute(tx, deps, open.stage === 'inquiry' ? await escalate(tx, deps, open) : open, 'lost');
        return { status: 200, body: disputeJson(closed, open) };
      });
      return sendStored(c, stored);
    });
}

/** An open chargeback holds the charge's money at the network: the PSP refuses to refund it (`is_charge_refundable: false`). */
export async function openChargebackOf(tx: Tx, charge: Pick<ChargeRow, 'id'>): Promise<DisputeRow | null> {
  const [row] = await tx<DisputeRow[]>`
    SELECT * FROM sandbox.disputes WHERE charge_id = ${charge.id} AND stage = 'chargeback' AND status IN ('needs_response', 'under_review')`;
  return row ?? null;
}
