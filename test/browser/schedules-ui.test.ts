import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { periodicJobs, scheduleId } from '../../shared/jobs';
import { deleteSchedules, ensureSchedules } from '../../worker/schedules';
import { launchBrowser } from '../helpers/browser';
import { startStack, type TestStack } from '../helpers/stack';

/**
 * docs/CONTRACT.md §5.10: the periodic jobs' Schedules are visible to an operator on the Web
 * UI's Schedules page, as a worker creates them at start. Checked in headless Chromium against
 * the run's dev server UI (screenshot in test/artifacts/).
 */

const artifacts = path.resolve('test/artifacts');
let stack: TestStack;
let browser: Browser | undefined;

beforeAll(async () => {
  mkdirSync(artifacts, { recursive: true });
  stack = await startStack();
  await ensureSchedules(stack.temporal, { taskQueue: stack.taskQueue, providers: ['sandbox'], reconciliationLookbackHours: 3, retentionIntervalSeconds: 300, abandonedRunsIntervalSeconds: 300 });
});

afterAll(async () => {
  await browser?.close();
  if (stack) await deleteSchedules(stack.temporal, stack.taskQueue);
  await stack?.stop();
});

describe("the Web UI's Schedules page", () => {
  it('lists the four periodic jobs of the deployment, and a Schedule’s page shows its workflow type', async () => {
    browser = await launchBrowser();
    const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
    const uiUrl = inject('temporalUiUrl');
    const deadline = Date.now() + 60_000;
    for (;;) {
      await page.goto(`${uiUrl}/namespaces/default/schedules`);
      try {
        for (const job of periodicJobs) await page.getByText(scheduleId(stack.taskQueue, job), { exact: true }).first().waitFor({ timeout: 10_000 });
        break;
      } catch (error) {
        // The schedule list is read from visibility: eventually consistent.
        if (Date.now() > deadline) throw error;
      }
    }
    await page.screenshot({ path: path.join(artifacts, 'temporal-ui-schedules.png') });
    const daily = scheduleId(stack.taskQueue, 'reconciliation-daily');
    await page.goto(`${uiUrl}/namespaces/default/schedules/${encodeURIComponent(daily)}`);
    await page.getByText('reconciliationWorkflow').first().waitFor({ timeout: 20_000 });
    expect(await page.getByText(daily).first().isVisible(), `the schedule ${daily} named on its page`).toBe(true);
    await page.screenshot({ path: path.join(artifacts, 'temporal-ui-schedule-daily.png') });
  });
});
