/**
 * The merchant's commands to a payment's run (capture, cancel): taken by update while a wait is
 * on and the lifecycle table says the status accepts them, answered when the phase that waits
 * for them has acted. Part of the run's state (state.ts), under the phases.
 */
import { ApplicationFailure, condition, setHandler } from '@temporalio/workflow';
import { accepts, commandRefusal } from '../../domain/payments';
import { FailureType, type FinalResponse } from '../../shared/definitions';
import { cancelUpdate, captureUpdate } from '../../shared/payments';
import { serveRequest } from '../interceptors';
import type { Command, RunState } from './state';

function refusalType(command: Pick<Command, 'kind'>): string {
  return command.kind === 'capture' ? FailureType.PaymentNotCapturable : FailureType.PaymentNotCancelable;
}

/**
 * Commands (capture, cancel): accepted while a wait is on and the lifecycle table says the
 * status accepts them. Registered when the first wait begins.
 */
export function listenForCommands(run: RunState): void {
  if (run.listening) return;
  run.listening = true;
  setHandler(captureUpdate, (request) => acceptCommand(run, { kind: 'capture', request }), {
    validator: (request) => {
      refuseUnlessAccepted(run, 'capture');
      if (request.amountMinor !== null && request.amountMinor > run.input.amountMinor) {
        throw ApplicationFailure.create({
          type: FailureType.CaptureExceedsAuthorized,
          message: `capture of ${request.amountMinor} exceeds the authorized ${run.input.amountMinor}`,
          nonRetryable: true,
        });
      }
    },
  });
  setHandler(cancelUpdate, (request) => acceptCommand(run, { kind: 'cancel', request }), {
    validator: (_request) => refuseUnlessAccepted(run, 'cancel'),
  });
}

async function acceptCommand(run: RunState, next: Command): Promise<FinalResponse> {
  run.updatesTaken++;
  if (run.command) {
    // The validator admits one command; this only guards against two in one activation.
    throw ApplicationFailure.create({ type: refusalType(next), message: `payment ${run.input.paymentId} already has a ${run.command.kind} in progress`, nonRetryable: true });
  }
  run.command = next;
  serveRequest(next.request.requestId);
  await condition(() => run.commandResponse !== undefined || run.commandRefused !== undefined);
  if (run.commandRefused) throw run.commandRefused;
  return run.commandResponse!;
}

function refuseUnlessAccepted(run: RunState, kind: Command['kind']): void {
  if (!run.accepting || run.command || !accepts(run.status, kind)) {
    const message = run.command ? `payment ${run.input.paymentId} already has a ${run.command.kind} in progress` : commandRefusal(run.input.paymentId, run.status, kind);
    throw ApplicationFailure.create({ type: refusalType({ kind }), message, nonRetryable: true });
  }
}
