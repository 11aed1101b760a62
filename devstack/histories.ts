/**
 * The recorded workflow histories under test/histories/: where they are, what their index
 * says, and what a history shows (its workflow type, activities, patch markers). Shared by
 * the recorder (scripts/record-histories.ts), the replay script and the replay tests.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { historyFromJSON, type History } from '@temporalio/common/lib/proto-utils';
import { KEY_ID_METADATA } from '../lib/payload-codec';
import { projectRoot } from './temporal-cli';

export const historiesDir = path.join(projectRoot, 'test', 'histories');
export const historyIndexPath = path.join(historiesDir, 'index.json');
/** The workflow code a history must replay against: bundled exactly as the worker bundles it. */
export { failureConverterPath, workflowInterceptorModules, workflowsPath } from '../worker/worker';

/** Markers the SDK core writes: for patched() / deprecatePatch(), and for a local activity. */
const PATCH_MARKER = 'core_patch';
const LOCAL_ACTIVITY_MARKER = 'core_local_activity';

/** What the code that produced a history was. */
export interface CodeVersion {
  /** git HEAD when the history was recorded. */
  commit: string;
  /** True if workflows/ or shared/ had uncommitted changes then (the hash below still pins them). */
  uncommittedChanges: boolean;
  /** SHA-256 over the workflow code's sources (the .ts files in workflows/ and shared/, their folders included), see workflowSourceHash(). */
  workflowSourceSha256: string;
  /** Free text, e.g. "current workflow code". */
  label: string;
}

/** One recorded history, as test/histories/index.json lists it. */
export interface HistoryEntry {
  file: string;
  scenario: string;
  workflowType: string;
  workflowId: string;
  /** What the history demonstrates. */
  shows: string;
  events: number;
  activities: string[];
  localActivities: number;
  updates: string[];
  /** Highest attempt number an activity started with (> 1: retried). */
  maxActivityAttempt: number;
  /** patched() markers in the history: the code paths it was recorded on. */
  patches: string[];
  recordedAt: string;
  recordedWith: CodeVersion;
  temporal: { sdk: string; server: string };
}

export interface HistoryIndex {
  about: string;
  histories: HistoryEntry[];
}

export function readHistoryIndex(): HistoryIndex {
  return JSON.parse(readFileSync(historyIndexPath, 'utf8')) as HistoryIndex;
}

/** The *.json history files on disk (the index itself excluded). */
export function historyFilesOnDisk(): string[] {
  return readdirSync(historiesDir)
    .filter((f) => f.endsWith('.json') && f !== 'index.json')
    .sort();
}

export function loadHistory(file: string): History {
  return historyFromJSON(JSON.parse(readFileSync(path.join(historiesDir, file), 'utf8')));
}

/** The facts about a history that the index records, read from the history itself. */
export function describeHistory(history: History) {
  const events = history.events ?? [];
  const started = events.find((e) => e.workflowExecutionStartedEventAttributes)?.workflowExecutionStartedEventAttributes;
  const workflowType = started?.workflowType?.name ?? 'unknown';
  const activities: string[] = [];
  let localActivities = 0;
  let maxActivityAttempt = 0;
  const updates: string[] = [];
  const patches = new Set<string>();
  for (const event of events) {
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (scheduled?.activityType?.name) activities.push(scheduled.activityType.name);
    const attempt = event.activityTaskStartedEventAttributes?.attempt;
    if (attempt) maxActivityAttempt = Math.max(maxActivityAttempt, attempt);
    const accepted = event.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.name;
    if (accepted) updates.push(accepted);
    const marker = event.markerRecordedEventAttributes;
    if (marker?.markerName === PATCH_MARKER) {
      const id = patchIdOf(marker.details?.['patch-data']?.payloads?.[0]?.data);
      if (id) patches.add(id);
    } else if (marker?.markerName === LOCAL_ACTIVITY_MARKER) {
      localActivities++;
    }
  }
  return { workflowType, events: events.length, activities, localActivities, updates, maxActivityAttempt, patches: [...patches].sort() };
}

/** The payload keys a history's payloads are encrypted under (lib/payload-codec.ts), by id. */
export function encryptionKeyIds(history: History): string[] {
  const ids = new Set<string>();
  const visit = (value: unknown): void => {
    if (!value || typeof value !== 'object' || ArrayBuffer.isView(value)) return;
    if (Array.isArray(value)) return value.forEach(visit);
    const metadata = (value as { metadata?: Record<string, Uint8Array> }).metadata;
    const keyId = metadata?.[KEY_ID_METADATA];
    if (keyId && ArrayBuffer.isView(keyId)) ids.add(Buffer.from(keyId).toString('utf8'));
    for (const child of Object.values(value)) visit(child);
  };
  visit(history.events ?? []);
  return [...ids].sort();
}

function patchIdOf(data: Uint8Array | null | undefined): string | null {
  if (!data) return null;
  try {
    const parsed = JSON.parse(Buffer.from(data).toString('utf8')) as { id?: string };
    return parsed.id ?? null;
  } catch {
    return null;
  }
}

/**
 * A hash of everything that is bundled into the workflow code (workflows/ and the shared
 * definitions it imports), so an index entry pins the exact code it was recorded with even
 * when that code was not committed yet. `replaced`: sources that were recorded instead of the
 * file on disk (an altered copy), by path.
 */
export function workflowSourceHash(replaced: Record<string, string> = {}): string {
  const hash = createHash('sha256');
  for (const dir of ['workflows', 'shared']) {
    // Its folders too (workflows/payments/: the payment run's phases).
    for (const file of readdirSync(path.join(projectRoot, dir), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts')).map((f) => f.split(path.sep).join('/')).sort()) {
      hash.update(`${dir}/${file}\0`);
      hash.update(replaced[`${dir}/${file}`] ?? readFileSync(path.join(projectRoot, dir, file)));
      hash.update('\0');
    }
  }
  return hash.digest('hex');
}
