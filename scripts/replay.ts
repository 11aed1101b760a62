/**
 * npm run replay -- --workflow-id <id> [--run-id <id>] [--address host:port] [--namespace default]
 *                   [--workflows-path <entry.ts>]
 *
 * Fetches a live workflow's history from the Temporal server and replays it against the
 * local workflow code (workflows/, bundled as the worker bundles it), so you know before a
 * deploy whether the running workflows will survive the change. Prints one verdict line:
 *
 *   PASS: workflow <id> (<type>, N events) replays deterministically against the local code
 *   FAIL: workflow <id> (<type>, N events) does not replay against the local code: <error>
 *
 * Exit code 0 on PASS, 1 on FAIL, 2 when there is nothing to judge (bad arguments, the
 * server unreachable, no such workflow). The address defaults to TEMPORAL_ADDRESS, then
 * 127.0.0.1:7233; --workflows-path replays against other workflow code (e.g. a branch's).
 * Payloads are decrypted with TEMPORAL_PAYLOAD_KEYS, the worker's keys (lib/config.ts).
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { loadConfig } from '../lib/config';
import { paymentDataConverter } from '../lib/data-converter';
import { tracingWorkflowSinks } from '../lib/tracing';
import { temporalConnectionSettings } from '../lib/temporal-connection';
import { describeHistory, encryptionKeyIds, failureConverterPath, workflowInterceptorModules, workflowsPath as localWorkflowsPath } from '../devstack/histories';

const usage = 'usage: npm run replay -- --workflow-id <id> [--run-id <id>] [--address host:port] [--namespace default] [--workflows-path <entry.ts>]';

class NothingToJudge extends Error {}

function options() {
  try {
    return parseArgs({
      options: {
        'workflow-id': { type: 'string' },
        'run-id': { type: 'string' },
        address: { type: 'string', default: process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233' },
        namespace: { type: 'string', default: process.env.TEMPORAL_NAMESPACE ?? 'default' },
        'workflows-path': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }).values;
  } catch (error) {
    throw new NothingToJudge(`${(error as Error).message}\n${usage}`);
  }
}

async function main(): Promise<number> {
  const values = options();
  if (values.help) {
    console.log(usage);
    return 0;
  }
  const workflowId = values['workflow-id'];
  if (!workflowId) throw new NothingToJudge(`--workflow-id is required\n${usage}`);
  const workflowsPath = values['workflows-path'] ? path.resolve(values['workflows-path']) : localWorkflowsPath;
  let keys;
  try {
    keys = loadConfig().TEMPORAL_PAYLOAD_KEYS;
  } catch (error) {
    throw new NothingToJudge((error as Error).message);
  }

  // Replay failures are the verdict, printed once below; the SDK's own logging would repeat them.
  Runtime.install({ logger: new DefaultLogger('ERROR'), telemetryOptions: { logging: { filter: { core: 'ERROR', other: 'ERROR' }, forward: {} } } });

  let history;
  let connection: Connection;
  try {
    // TLS / API key from the environment, as every process reads them (TEMPORAL_TLS_*, TEMPORAL_API_KEY).
    connection = await Connection.connect({ ...temporalConnectionSettings({ ...process.env, TEMPORAL_TLS: process.env.TEMPORAL_TLS === 'true', TEMPORAL_ADDRESS: values.address! }), connectTimeout: '5 seconds' });
  } catch (error) {
    throw new NothingToJudge(`cannot reach Temporal at ${values.address}: ${(error as Error).message}`);
  }
  try {
    const client = new Client({ connection, namespace: values.namespace! });
    history = await client.workflow.getHandle(workflowId, values['run-id']).fetchHistory();
  } catch (error) {
    throw new NothingToJudge(`cannot fetch the history of workflow ${workflowId} from ${values.address} (namespace ${values.namespace}): ${(error as Error).message}`);
  } finally {
    await connection.close();
  }

  // Without the key a replay cannot even read the workflow's input: that is no verdict on the code.
  const held = new Set((keys ?? []).map((k) => k.id));
  const missing = encryptionKeyIds(history).filter((id) => !held.has(id));
  if (missing.length) {
    throw new NothingToJudge(`the history of workflow ${workflowId} is encrypted under payload key(s) ${missing.join(', ')}: set TEMPORAL_PAYLOAD_KEYS to the worker's keys`);
  }
  const { workflowType, events } = describeHistory(history);
  const subject = `workflow ${workflowId} (${workflowType}, ${events} events)`;
  const { code } = await bundleWorkflowCode({ workflowsPath, workflowInterceptorModules, failureConverterPath, logger: new DefaultLogger('WARN') });
  try {
    await Worker.runReplayHistory({ workflowBundle: { code }, replayName: 'replay-script', dataConverter: paymentDataConverter(keys), sinks: tracingWorkflowSinks() }, history, workflowId);
  } catch (error) {
    const name = error instanceof Error ? error.name : 'Error';
    const message = error instanceof Error ? error.message : String(error);
    console.log(`FAIL: ${subject} does not replay against ${describeCode(workflowsPath)}: ${name}: ${message}`);
    return 1;
  }
  console.log(`PASS: ${subject} replays deterministically against ${describeCode(workflowsPath)}`);
  return 0;
}

function describeCode(workflowsPath: string): string {
  return workflowsPath === localWorkflowsPath ? 'the local code' : `the code at ${path.relative(process.cwd(), workflowsPath)}`;
}

main().then(
  (code) => process.exit(code),
  (error) => {
    console.error(`ERROR: ${error instanceof NothingToJudge ? error.message : error instanceof Error ? error.stack : String(error)}`);
    process.exit(2);
  },
);
