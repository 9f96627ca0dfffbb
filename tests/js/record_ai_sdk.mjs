// Records the Vercel AI SDK's own OpenTelemetry spans for one conversation of three
// generateText calls against a loopback OpenAI-compatible provider, and writes them as OTLP/JSON
// lines (one ExportTraceServiceRequest a line, the Collector file exporter's form).
//
//   node tests/js/record_ai_sdk.mjs MODE --base-url URL --out FILE
//
// MODE `legacy`: @ai-sdk/otel's LegacyOpenTelemetry (the `ai.*` spans, `ai.prompt.messages`).
// MODE `otel`:   @ai-sdk/otel's OpenTelemetry (GenAI semantic conventions, `invoke_agent`,
//                `gen_ai.input.messages`).
// AI SDK 7 records nothing with `experimental_telemetry` alone: spans come only from an
// integration registered with `registerTelemetry(...)`, so both modes register one.
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";

import { LegacyOpenTelemetry, OpenTelemetry } from "@ai-sdk/otel";
import { createOpenAI } from "@ai-sdk/openai";
import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { generateText, registerTelemetry } from "ai";

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: { "base-url": { type: "string" }, out: { type: "string" } },
});
const mode = positionals[0];
const INTEGRATIONS = { legacy: LegacyOpenTelemetry, otel: OpenTelemetry };
if (!(mode in INTEGRATIONS) || !values["base-url"] || !values.out) {
  process.stderr.write("usage: record_ai_sdk.mjs legacy|otel --base-url URL --out FILE\n");
  process.exit(2);
}

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
trace.setGlobalTracerProvider(provider);
registerTelemetry(new INTEGRATIONS[mode]());

const openai = createOpenAI({ baseURL: values["base-url"], apiKey: "k" });
const model = openai.chat("gpt-4o-mini");

const system = { role: "system", content: "Be terse." };
const user = { role: "user", content: "list files" };
const call = {
  role: "assistant",
  content: [{ type: "tool-call", toolCallId: "call_1", toolName: "ls", input: {} }],
};
const result = {
  role: "tool",
  content: [
    {
      type: "tool-result",
      toolCallId: "call_1",
      toolName: "ls",
      output: { type: "text", value: "a.py" },
    },
  ],
};
const CONVERSATION = [
  [system, user],
  [system, user, call, result],
  // The tool result's call is dropped, as a pruned history would.
  [
    system,
    user,
    result,
    { role: "assistant", content: "one file" },
    { role: "user", content: "thanks" },
  ],
];

// One trace: the three calls run under one application span, as an app's request handler would.
const tracer = trace.getTracer("record_ai_sdk");
await tracer.startActiveSpan("conversation", async (span) => {
  try {
    for (const messages of CONVERSATION) {
      await generateText({
        model,
        messages,
        allowSystemInMessages: true,
        experimental_telemetry: { isEnabled: true, recordInputs: true, recordOutputs: true },
      });
    }
  } finally {
    span.end();
  }
});
await provider.forceFlush();

// ReadableSpan -> OTLP/JSON (ids as hex, int64 as decimal strings, enums as numbers).
function anyValue(value) {
  if (Array.isArray(value)) return { arrayValue: { values: value.map(anyValue) } };
  if (typeof value === "boolean") return { boolValue: value };
  if (typeof value === "number") {
    return Number.isInteger(value) ? { intValue: String(value) } : { doubleValue: value };
  }
  return { stringValue: String(value) };
}
const keyValues = (attributes = {}) =>
  Object.entries(attributes)
    .filter(([, value]) => value !== undefined && value !== null)
    .map(([key, value]) => ({ key, value: anyValue(value) }));
const nanos = ([seconds, nanoseconds]) => String(BigInt(seconds) * 1_000_000_000n + BigInt(nanoseconds));

function otlpSpan(span) {
  const { traceId, spanId, traceState } = span.spanContext();
  const parent = span.parentSpanContext?.spanId ?? span.parentSpanId;
  const out = {
    traceId,
    spanId,
    ...(traceState ? { traceState: traceState.serialize() } : {}),
    ...(parent ? { parentSpanId: parent } : {}),
    name: span.name,
    kind: span.kind + 1, // API SpanKind starts at INTERNAL = 0; OTLP's at UNSPECIFIED = 0
    startTimeUnixNano: nanos(span.startTime),
    endTimeUnixNano: nanos(span.endTime),
    attributes: keyValues(span.attributes),
    status: { code: span.status.code, ...(span.status.message ? { message: span.status.message } : {}) },
  };
  if (span.events.length) {
    out.events = span.events.map((event) => ({
      timeUnixNano: nanos(event.time),
      name: event.name,
      attributes: keyValues(event.attributes),
    }));
  }
  if (span.links.length) {
    out.links = span.links.map((link) => ({
      traceId: link.context.traceId,
      spanId: link.context.spanId,
      attributes: keyValues(link.attributes),
    }));
  }
  return out;
}

const spans = exporter.getFinishedSpans();
const scopes = new Map();
for (const span of spans) {
  const scope = span.instrumentationScope ?? span.instrumentationLibrary;
  const key = `${scope.name}@${scope.version ?? ""}`;
  if (!scopes.has(key)) {
    scopes.set(key, {
      scope: { name: scope.name, ...(scope.version ? { version: scope.version } : {}) },
      spans: [],
      ...(scope.schemaUrl ? { schemaUrl: scope.schemaUrl } : {}),
    });
  }
  scopes.get(key).spans.push(otlpSpan(span));
}
const request = {
  resourceSpans: [
    {
      resource: { attributes: keyValues(spans[0]?.resource.attributes) },
      scopeSpans: [...scopes.values()],
    },
  ],
};
writeFileSync(values.out, `${JSON.stringify(request)}\n`);
process.stderr.write(`${mode}: ${spans.length} spans written to ${values.out}\n`);
