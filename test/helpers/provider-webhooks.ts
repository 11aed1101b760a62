import { expect } from 'vitest';
import { signSandboxWebhook } from '../../provider/sandbox/webhook';
import type { TestStack } from './stack';

/** Posts an event to the stack's sandbox webhook route as the sandbox would: the JSON body signed with the stack's real secret. */
export function postSandboxEvent(stack: TestStack, event: Record<string, unknown>): Promise<Response> {
  const raw = JSON.stringify(event);
  return fetch(`${stack.apiUrl}/provider_webhooks/sandbox`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'sandbox-signature': signSandboxWebhook(raw, stack.sandboxWebhookSecret) },
    body: raw,
  });
}

/** The route's answer to a signed event it refuses for its content: 400 `invalid_request` whose issues name exactly these paths. */
export async function expectInvalidEvent(answer: Response, paths: string[]): Promise<void> {
  const body = (await answer.json()) as { error: { type: string; issues?: { path: string }[] } };
  expect(answer.status, JSON.stringify(body)).toBe(400);
  expect(body.error.type).toBe('invalid_request');
  expect(body.error.issues?.map((i) => i.path)).toEqual(paths);
}
