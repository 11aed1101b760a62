import { ActivityFailure, ApplicationFailure, log } from '@temporalio/workflow';

/**
 * Compensations as a stack, run newest first. Each failure is logged and the rest still
 * run; the caller records both lists on the payment so nothing is dropped silently.
 * (The provider steps retry without limit, so a compensation only "fails" when the provider
 * refuses it outright.)
 */
export class Compensations {
  private readonly stack: { description: string; undo: () => Promise<unknown> }[] = [];

  push(description: string, undo: () => Promise<unknown>): void {
    this.stack.push({ description, undo });
  }

  /** Swaps the newest compensation for one that fits the step that just succeeded. */
  replace(description: string, undo: () => Promise<unknown>): void {
    this.stack.pop();
    this.push(description, undo);
  }

  async run(): Promise<{ undone: string[]; failed: string[] }> {
    const undone: string[] = [];
    const failed: string[] = [];
    for (let next = this.stack.pop(); next; next = this.stack.pop()) {
      try {
        await next.undo();
        undone.push(next.description);
      } catch (error) {
        log.error('compensation failed', { compensation: next.description, error: String(error) });
        // An activity's failure says only "Activity task failed"; the provider's reason is its cause.
        const reason = error instanceof ActivityFailure && error.cause ? error.cause : error;
        failed.push(`${next.description} (${reason instanceof Error ? reason.message : String(reason)})`);
      }
    }
    return { undone, failed };
  }
}

/** The ApplicationFailure of this type behind an activity failure, if that is what it is. */
export function failureOfType(error: unknown, type: string): ApplicationFailure | null {
  const cause = error instanceof ActivityFailure ? error.cause : error;
  return cause instanceof ApplicationFailure && cause.type === type ? cause : null;
}
