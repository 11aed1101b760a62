import { type WorkflowHandle } from '@temporalio/client';
import protos from '@temporalio/proto';

const { EventType } = protos.temporal.api.enums.v1;

/**
 * The steps a run's history records, in order: its activities as scheduled and its local
 * activities (the database steps) as the markers of their results. A local activity whose
 * workflow task was not completed (a signal arriving while it ran makes the server refuse the
 * run's last command) runs again on the next task; the fakes then count two calls, while the
 * history keeps one: what the run decided. Read after the run has ended.
 */
export async function recordedSteps(handle: WorkflowHandle): Promise<string[]> {
  const history = await handle.fetchHistory();
  return (history.events ?? []).flatMap((e) => {
    if (e.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED) return [e.activityTaskScheduledEventAttributes!.activityType!.name!];
    const marker = e.markerRecordedEventAttributes;
    if (marker?.markerName !== 'core_local_activity') return [];
    // The SDK's own marker data is plain JSON (only the result goes through the codec).
    const data = marker.details!.data!.payloads![0]!.data!;
    return [(JSON.parse(Buffer.from(data).toString('utf8')) as { activity_type: string }).activity_type];
  });
}
