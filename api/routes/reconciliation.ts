import { createRoute, OpenAPIHono } from '@hono/zod-openapi';
import { getRun, listRuns, runFindings, type ReconciliationRunRow, type RunFindingRow } from '../../db/reconciliation';
import { ApiError } from '../../domain/errors';
import { looksLikeId } from '../../domain/ids';
import type { ApiDeps, AppEnv } from '../context';
import { IdParam, listOf, ListReconciliationRunsQuery, ReconciliationRun, ReconciliationRunDetail } from '../schemas';
import { errorResponses, jsonContent } from './openapi';

const listRunsRoute = createRoute({
  method: 'get',
  path: '/admin/reconciliation/runs',
  tags: ['Admin'],
  summary: 'Reconciliation runs, newest first (admin token)',
  security: [{ adminToken: [] }],
  description:
    "Each run compared one provider's balance-transaction report for one time window with our payments, refunds and ledger " +
    '(the daily and hourly Schedules, a trigger or a backfill). A clean run says so; a run with differences counts them.',
  request: { query: ListReconciliationRunsQuery },
  responses: {
    200: { description: 'A page of runs.', content: jsonContent(listOf(ReconciliationRun, 'ReconciliationRunList')) },
    ...errorResponses(['invalid_request', 'unauthorized']),
  },
});

const getRunRoute = createRoute({
  method: 'get',
  path: '/admin/reconciliation/runs/{id}',
  tags: ['Admin'],
  summary: 'A reconciliation run and its discrepancies (admin token)',
  security: [{ adminToken: [] }],
  description: 'Every difference the run found, with both sides’ figures: ours (payment or refund, and the ledger) and the provider’s.',
  request: { params: IdParam('reconciliation run', 'rcn_01jd6w8b3m4x0c2q7yk5h9t1ve') },
  responses: {
    200: { description: 'The run.', content: jsonContent(ReconciliationRunDetail) },
    ...errorResponses(['unauthorized', 'not_found']),
  },
});

function runResource(run: ReconciliationRunRow) {
  return {
    id: run.id,
    object: 'reconciliation_run' as const,
    provider: run.provider,
    window: { from: run.window_from.toISOString(), to: run.window_to.toISOString() },
    status: run.status,
    started_at: run.started_at.toISOString(),
    finished_at: run.finished_at?.toISOString() ?? null,
    discrepancy_count: run.discrepancy_count,
    provider_transactions: run.provider_transactions,
    workflow_id: run.workflow_id,
    error: run.error,
  };
}

function discrepancyResource(finding: RunFindingRow) {
  return {
    id: finding.id,
    object: 'reconciliation_discrepancy' as const,
    kind: finding.kind,
    payment_id: finding.payment_id,
    refund_id: finding.refund_id,
    provider_reference: finding.provider_reference,
    ours: finding.ours,
    provider: finding.provider_figures,
    first_run_id: finding.first_run_id,
    created_at: finding.created_at.toISOString(),
  };
}

/** Reconciliation runs and what they found: how an operator reads a run (docs/operating.md, "Reconciliation with the PSP"). */
export function reconciliationRoutes(deps: ApiDeps) {
  const app = new OpenAPIHono<AppEnv>();

  app.openapi(listRunsRoute, async (c) => {
    const query = c.req.valid('query');
    const page = await listRuns(deps.sql, { limit: query.limit, startingAfter: query.starting_after, endingBefore: query.ending_before, ...(query.provider !== undefined ? { provider: query.provider } : {}) });
    return c.json({ object: 'list' as const, data: page.rows.map(runResource), has_more: page.hasMore }, 200);
  });

  app.openapi(getRunRoute, async (c) => {
    const { id } = c.req.valid('param');
    const run = looksLikeId('rcn', id) ? await getRun(deps.sql, id) : null;
    if (!run) throw new ApiError('not_found', `No such reconciliation run: ${id}`);
    const findings = await runFindings(deps.sql, run.id);
    return c.json({ ...runResource(run), discrepancies: findings.map(discrepancyResource) }, 200);
  });

  return app;
}
