import { context, propagation, ROOT_CONTEXT, type Context, type TextMapGetter } from '@opentelemetry/api';

/**
 * The trace context of `ctx` (default: the active one) as message headers, through the globally
 * registered propagator: `traceparent` and `tracestate` with the W3C Trace Context propagator
 * (the default of the OpenTelemetry Node SDK), plus `baggage` or `b3` if you registered those.
 * Pass it as the instance's `publishHeaders` option so every published message carries the
 * context of the code that published it; relays forward message headers to the destination.
 *
 * Returns `{}` when there is no active span or no propagator is registered.
 *
 * @example
 * import { traceContextHeaders } from 'outboxer/opentelemetry';
 * const outboxer = new Outboxer({ database, outboxes, publishHeaders: traceContextHeaders });
 */
export function traceContextHeaders(ctx: Context = context.active()): Record<string, string> {
  const headers: Record<string, string> = {};
  propagation.inject(ctx, headers);
  return headers;
}

const headerGetter: TextMapGetter<Readonly<Record<string, string>>> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => {
    if (Object.hasOwn(carrier, key)) return carrier[key];
    // Headers set by hand may not be lower-case; propagators ask for lower-case names.
    const name = Object.keys(carrier).find((k) => k.toLowerCase() === key);
    return name === undefined ? undefined : carrier[name];
  },
};

/**
 * The context stored in a message's headers by {@link traceContextHeaders}, through the global
 * propagator: use it in a consumer to continue the publisher's trace, or to link to it.
 *
 * @example
 * const parent = extractTraceContext(envelope.headers);
 * tracer.startActiveSpan('handle order', {}, parent, (span) => { ... });
 */
export function extractTraceContext(
  headers: Readonly<Record<string, string>>,
  base: Context = ROOT_CONTEXT,
): Context {
  return propagation.extract(base, headers, headerGetter);
}
