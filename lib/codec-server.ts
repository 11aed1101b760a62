/**
 * The codec server: Temporal's remote codec protocol over HTTP, so the Web UI (and
 * `temporal workflow show --codec-endpoint`) can show the payloads that the API and the
 * worker encrypted. `POST /decode` and `POST /encode` take and return
 * `{"payloads":[{"metadata":{"<name>":"<base64>"},"data":"<base64>"}]}` (proto-JSON) and
 * receive the namespace in `X-Namespace`. The browser calls it directly from the UI's page,
 * hence CORS for the UI's origin. With a token configured, only requests bearing it are
 * answered: whoever can call /decode reads every payment's data (production refuses to start
 * without one: assertSafeCodecServer in lib/config.ts). Only `application/json` bodies are
 * read (415 otherwise): a `text/plain` POST is a CORS "simple request" any web page can send
 * without a preflight. /encode, which encrypts anything under the live key, is off unless
 * enabled. The listener (lib/listener.ts) checks `Host` and bounds slow and idle clients.
 */
import { timingSafeEqual } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { cors } from 'hono/cors';
import { z } from 'zod';
import type { Payload, PayloadCodec } from '@temporalio/common';
import protos from '@temporalio/proto';

// CommonJS: Node's ESM loader does not see its named exports.
const { temporal } = protos;
import { apiErrorBody } from '../domain/errors';
import { serveHttp, type ListenerLimits } from './listener';

export interface CodecServerOptions {
  codec: PayloadCodec;
  /** Bearer token required on /decode and /encode; null: open (loopback development only). */
  token: string | null;
  /** Origins of the Web UI allowed to call from a browser. */
  allowedOrigins: string[];
  /** POST /encode: off unless true (CODEC_ENABLE_ENCODE). */
  enableEncode?: boolean;
}

const base64 = z.string().regex(/^[A-Za-z0-9+/]*={0,2}$/, 'base64');
const payloadsBody = z.object({
  payloads: z
    .array(z.object({ metadata: z.record(z.string(), base64).optional(), data: base64.optional() }))
    .max(10_000),
});
type JsonPayload = z.infer<typeof payloadsBody>['payloads'][number];

/** Larger than any payload this service writes (the UI sends a whole history page at once). */
const MAX_BODY_BYTES = 16 * 1024 * 1024;

export function createCodecApp(options: CodecServerOptions): Hono {
  const app = new Hono();
  const expected = options.token ? Buffer.from(`Bearer ${options.token}`) : null;

  app.use(
    '*',
    cors({
      origin: options.allowedOrigins,
      allowMethods: ['POST', 'OPTIONS'],
      // What the UI sends: the namespace, its own bearer token when configured, JSON.
      allowHeaders: ['x-namespace', 'authorization', 'content-type'],
      credentials: true,
      maxAge: 600,
    }),
  );
  app.get('/healthz', (c) => c.json({ status: 'ok' }));

  // Counted as the body streams in, so a chunked body without Content-Length is bounded too.
  const limited = bodyLimit({
    maxSize: MAX_BODY_BYTES,
    onError: (c) => c.json(apiErrorBody('payload_too_large', `At most ${MAX_BODY_BYTES} bytes per request.`), 413),
  });
  for (const direction of ['encode', 'decode'] as const) {
    app.post(`/${direction}`, limited, async (c) => {
      if (expected) {
        const given = Buffer.from(c.req.header('authorization') ?? '');
        if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
          return c.json(apiErrorBody('unauthorized', 'The codec server needs `Authorization: Bearer <CODEC_TOKEN>`.'), 401);
        }
      }
      if (direction === 'encode' && !options.enableEncode) {
        return c.json(apiErrorBody('not_found', 'POST /encode is off on this codec server (CODEC_ENABLE_ENCODE=true turns it on).'), 404);
      }
      if (!/^application\/json\s*(;|$)/i.test(c.req.header('content-type') ?? '')) {
        return c.json(apiErrorBody('unsupported_media_type', 'Send the body as JSON with "Content-Type: application/json".'), 415);
      }
      let body: unknown;
      try {
        body = await c.req.json();
      } catch {
        return c.json(apiErrorBody('invalid_request', 'The body must be JSON: {"payloads":[…]}.'), 400);
      }
      const parsed = payloadsBody.safeParse(body);
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        return c.json(apiErrorBody('invalid_request', `Invalid body at ${issue?.path.join('.') || '(root)'}: ${issue?.message}.`), 400);
      }
      const payloads = parsed.data.payloads.map(fromJson);
      try {
        const result = direction === 'encode' ? await options.codec.encode(payloads) : await options.codec.decode(payloads);
        return c.json({ payloads: result.map(toJson) });
      } catch (error) {
        // A payload under an unknown key or tampered with: the caller's data, not our fault.
        return c.json(apiErrorBody('invalid_request', `Cannot ${direction} these payloads: ${(error as Error).message}.`), 400);
      }
    });
  }
  app.notFound((c) => c.json(apiErrorBody('not_found', 'The codec server answers POST /decode and POST /encode.'), 404));
  return app;
}

function fromJson(payload: JsonPayload): Payload {
  return temporal.api.common.v1.Payload.fromObject(payload) as Payload;
}

function toJson(payload: Payload): JsonPayload {
  return temporal.api.common.v1.Payload.toObject(temporal.api.common.v1.Payload.create(payload), { bytes: String }) as JsonPayload;
}

export interface RunningCodecServer {
  url: string;
  close(): Promise<void>;
}

export async function startCodecServer(options: CodecServerOptions & { port: number; hostname?: string; limits?: ListenerLimits }): Promise<RunningCodecServer> {
  const app = createCodecApp(options);
  const hostname = options.hostname ?? '127.0.0.1';
  const server = await serveHttp(app.fetch, { port: options.port, hostname, limits: options.limits });
  return {
    url: `http://${hostname}:${(server.address() as AddressInfo).port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
