import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Link, type Span } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { Resource } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  type Sampler,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import type { WorkflowClientInterceptor } from '@temporalio/client';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry/lib/client/index.js';
import { makeWorkflowExporter, OpenTelemetryActivityInboundInterceptor, OpenTelemetryActivityOutboundInterceptor } from '@temporalio/interceptors-opentelemetry/lib/worker/index.js';
import type { ActivityInterceptorsFactory, InjectedSinks } from '@temporalio/worker';
import type { OpenTelemetryWorkflowExporter } from '@temporalio/interceptors-opentelemetry/lib/workflow/definitions';

/**
 * OpenTelemetry tracing of one process (docs/tracing.md). Off unless the standard
 * OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set: then no SDK is
 * started, the OpenTelemetry API stays its no-op, and the Temporal client and activity
 * interceptors are not installed. On, spans go to that endpoint over OTLP/HTTP (JSON), sampled
 * by OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG, under OTEL_SERVICE_NAME.
 */

/** The name of the tracer of the product's own spans (server, PSP calls, statements, deliveries). */
export const TRACER_NAME = 'payment-orchestrator';

/** Span attributes of the product's own vocabulary: how an operator finds a payment's trace. */
export const traceAttributes = {
  paymentId: 'payment.id',
  refundId: 'refund.id',
  disputeId: 'dispute.id',
  eventId: 'event.id',
  /** Temporal's own attribute key (the interceptors set it on start, signal and update spans). */
  workflowId: 'temporalWorkflowId',
  provider: 'psp.name',
  providerSubKey: 'psp.sub_key',
} as const;

interface ActiveTracing {
  provider: BasicTracerProvider;
  processor: SpanProcessor;
  serviceName: string;
}

let active: ActiveTracing | null = null;

type Env = Record<string, string | undefined>;

/** The endpoint spans are exported to, or null: tracing is off. */
export function tracingEndpoint(env: Env = process.env): string | null {
  if (env.OTEL_SDK_DISABLED === 'true' || env.OTEL_TRACES_EXPORTER === 'none') return null;
  return env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT || null;
}

/** OTEL_TRACES_SAMPLER (default parentbased_always_on) and OTEL_TRACES_SAMPLER_ARG, as the specification reads them. */
export function samplerFromEnv(env: Env = process.env): Sampler {
  const ratio = () => {
    const value = Number(env.OTEL_TRACES_SAMPLER_ARG ?? '1');
    return Number.isFinite(value) && value >= 0 && value <= 1 ? value : 1;
  };
  switch (env.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on') {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio());
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio()) });
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    default:
      throw new Error(`OTEL_TRACES_SAMPLER=${env.OTEL_TRACES_SAMPLER} is not one this product knows (docs/operating.md)`);
  }
}

/**
 * Starts this process's tracing when the environment asks for it (tracingEndpoint), and
 * registers it as the OpenTelemetry API's global provider. `serviceName` unless
 * OTEL_SERVICE_NAME says otherwise. Returns whether tracing is on. Call it before the
 * process creates its clients (createSql, Temporal clients, the worker).
 */
export function startTracing(serviceName: string, env: Env = process.env): boolean {
  if (active) return true;
  const endpoint = tracingEndpoint(env);
  if (!endpoint) return false;
  const name = env.OTEL_SERVICE_NAME || serviceName;
  // The exporter reads the endpoint variables itself (the generic one gets /v1/traces appended).
  const processor = new BatchSpanProcessor(new OTLPTraceExporter(), { scheduledDelayMillis: 500 });
  const provider = new BasicTracerProvider({ resource: new Resource({ 'service.name': name }), sampler: samplerFromEnv(env), spanProcessors: [processor] });
  provider.register({ contextManager: new AsyncLocalStorageContextManager(), propagator: new W3CTraceContextPropagator() });
  active = { provider, processor, serviceName: name };
  return true;
}

/** Whether startTracing started the SDK in this process. */
export function tracingOn(): boolean {
  return active !== null;
}

/** Exports what is buffered (tests read it right after). */
export async function flushTracing(): Promise<void> {
  await active?.provider.forceFlush();
}

/** Exports what is buffered, stops the SDK and gives the OpenTelemetry API back its no-ops. */
export async function stopTracing(): Promise<void> {
  const stopping = active;
  if (!stopping) return;
  active = null;
  await stopping.provider.shutdown().catch(() => {});
  trace.disable();
  context.disable();
  propagation.disable();
}

/** The interceptors of a Temporal client: the context of the caller's span goes into the workflow's headers. */
export function tracingClientInterceptors(): { workflow: WorkflowClientInterceptor[] } | undefined {
  return active ? { workflow: [new OpenTelemetryWorkflowClientInterceptor()] } : undefined;
}

/** The activity side: each activity a span under its workflow's (from the headers), its log lines with the span's ids. */
export function tracingActivityInterceptors(): ActivityInterceptorsFactory[] {
  return active ? [(ctx) => ({ inbound: new OpenTelemetryActivityInboundInterceptor(ctx), outbound: new OpenTelemetryActivityOutboundInterceptor(ctx) })] : [];
}

/**
 * The sink the workflow isolate's spans leave through (workflows/interceptors.ts). Always
 * registered, since the bundle always traces: off, it drops them. Only the run's identity is
 * added to each span's attributes, not its whole info (the memo, search attributes).
 */
export function tracingWorkflowSinks(): InjectedSinks<{ exporter: OpenTelemetryWorkflowExporter }> {
  const tracing = active;
  if (!tracing) return { exporter: { export: { fn: () => {} } } };
  const exporter = makeWorkflowExporter(tracing.processor, new Resource({ 'service.name': tracing.serviceName }));
  return {
    exporter: {
      export: {
        fn: (info, spans) => {
          const identity = { workflowId: info.workflowId, runId: info.runId, workflowType: info.workflowType, taskQueue: info.taskQueue, attempt: info.attempt };
          void exporter.export.fn(identity as typeof info, spans);
        },
      },
    },
  };
}

/** The product's tracer (the API's no-op one while tracing is off). */
export function tracer() {
  return trace.getTracer(TRACER_NAME);
}

/** The ids of the active span, for log lines; empty outside a sampled span or with tracing off. */
export function activeTraceIds(): { trace_id?: string; span_id?: string } {
  const span = trace.getActiveSpan();
  if (!span) return {};
  const { traceId, spanId, traceFlags } = span.spanContext();
  return traceFlags & 1 ? { trace_id: traceId, span_id: spanId } : {};
}

/**
 * Whether code runs inside a sampled span of this process (a request's, an activity's, a
 * delivery's): only there is a child span recorded (the samplers are parent-based).
 */
export function insideRecordingSpan(): boolean {
  return trace.getActiveSpan()?.isRecording() === true;
}

/** Sets attributes on the active span (a no-op without one). */
export function annotateActiveSpan(attributes: Attributes): void {
  trace.getActiveSpan()?.setAttributes(attributes);
}

/** The active span's context as a W3C traceparent, to link to it later; null without a sampled span. */
export function activeTraceparent(): string | null {
  const span = trace.getActiveSpan();
  if (!span || !(span.spanContext().traceFlags & 1)) return null;
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier.traceparent ?? null;
}

/** A link to the span a traceparent names (activeTraceparent), or none. */
export function linkTo(traceparent: string | null | undefined): Link[] {
  if (!traceparent) return [];
  const spanContext = trace.getSpanContext(propagation.extract(context.active(), { traceparent }));
  return spanContext ? [{ context: spanContext }] : [];
}

/**
 * Links the active span to the span a stored traceparent names (a webhook's or a duplicate
 * request's server span to the payment's trace). A no-op without one, or with tracing off.
 */
export function linkActiveSpan(traceparent: string | null | undefined): void {
  const span = trace.getActiveSpan();
  if (span) for (const link of linkTo(traceparent)) span.addLink(link);
}

/** The context of the span a stored traceparent names, to continue its trace (an event's delivery); undefined without one. */
export function contextOf(traceparent: string | null | undefined): Context | undefined {
  if (!active || !traceparent) return undefined;
  const parent = propagation.extract(ROOT_CONTEXT, { traceparent });
  return trace.getSpanContext(parent) ? parent : undefined;
}

/**
 * Runs `fn` in a span of its own (a child of the active span, or of `parent`), ended when it
 * settles, its status an error when it throws.
 */
export async function inSpan<T>(
  name: string,
  options: { kind?: SpanKind; attributes?: Attributes; links?: Link[]; parent?: Context },
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  if (!active) return fn(trace.wrapSpanContext({ traceId: '', spanId: '', traceFlags: 0 }));
  const parent = options.parent ?? context.active();
  return tracer().startActiveSpan(name, { kind: options.kind ?? SpanKind.INTERNAL, attributes: options.attributes ?? {}, links: options.links ?? [] }, parent, async (span) => {
    try {
      return await fn(span);
    } catch (error) {
      span.recordException(error as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error)?.message?.slice(0, 200) });
      throw error;
    } finally {
      span.end();
    }
  });
}

export { ROOT_CONTEXT, SpanKind, SpanStatusCode };

/** The attribute that names a resource of ours by its id's prefix (domain/ids.ts), if it is one an operator looks a trace up by. */
export function resourceAttribute(id: string): Attributes {
  const key = id.startsWith('pay_') ? traceAttributes.paymentId : id.startsWith('re_') ? traceAttributes.refundId : id.startsWith('dsp_') ? traceAttributes.disputeId : null;
  return key ? { [key]: id } : {};
}

/**
 * A server span around one HTTP request, continuing the caller's trace when its headers carry
 * one (W3C traceparent). `finish` names it by its route template once routing is done and
 * gives its status and attributes.
 */
export async function inServerSpan(
  method: string,
  headers: Headers,
  fn: () => Promise<void>,
  finish: () => { route: string; status: number; attributes: Attributes },
): Promise<void> {
  if (!active) return fn();
  const carrier: Record<string, string> = {};
  headers.forEach((value, key) => {
    if (key === 'traceparent' || key === 'tracestate') carrier[key] = value;
  });
  const parent = propagation.extract(context.active(), carrier);
  const span = tracer().startSpan(method, { kind: SpanKind.SERVER, attributes: { 'http.request.method': method } }, parent);
  try {
    await context.with(trace.setSpan(parent, span), fn);
  } finally {
    const { route, status, attributes } = finish();
    span.updateName(`${method} ${route}`);
    span.setAttributes({ 'http.route': route, 'http.response.status_code': status, ...attributes });
    if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
  }
}
