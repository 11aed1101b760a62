import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { startUi } from '../../devstack/temporal-cluster';
import { freePort } from '../../devstack/ports';

/**
 * The Temporal Web UI must not be able to terminate a payment. In cluster mode the UI
 * server (temporal-ui-server, the one compose runs as temporalio/ui) is configured read-only
 * unless TEMPORAL_UI_WRITE_ACTIONS=true; its own /api/v1/settings says which. The UI's
 * frontend address points nowhere: only its settings are read, on loopback.
 */

const children: ChildProcess[] = [];
const dirs: string[] = [];
afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function settingsOf(writeActions: boolean) {
  const dir = mkdtempSync(path.join(tmpdir(), 'ui-write-'));
  dirs.push(dir);
  const port = await freePort();
  children.push(await startUi(port, '127.0.0.1:1', 'default', dir, undefined, writeActions));
  return (await (await fetch(`http://127.0.0.1:${port}/api/v1/settings`)).json()) as { DisableWriteActions?: boolean; BatchActionsDisabled?: boolean };
}

describe('the cluster Web UI', () => {
  it('is read-only by default: no terminate, cancel, signal, reset or batch actions', async () => {
    expect(await settingsOf(false)).toMatchObject({ DisableWriteActions: true, BatchActionsDisabled: true });
  });

  it('offers them again with TEMPORAL_UI_WRITE_ACTIONS=true', async () => {
    expect(await settingsOf(true)).toMatchObject({ DisableWriteActions: false, BatchActionsDisabled: false });
  });
});
