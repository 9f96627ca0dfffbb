// Records the Vercel AI SDK's own OpenTelemetry spans for one conversation of three
// generateText calls against a loopback OpenAI-compatible provider, and writes them as OTLP/JSON
// lines (one ExportTraceServiceRequest a line, the Collector file exporter's form).
//
//   node tests/js/record_ai_sdk.mjs MODE --base-url URL --out FILE
//
// MODE `legacy`: AI SDK 7 with @ai-sdk/otel's LegacyOpenTelemetry (the `ai.*` spans,
//                `ai.prompt.messages`).
// MODE `otel`:   AI SDK 7 with @ai-sdk/otel's OpenTelemetry (GenAI semantic conventions,
//                `invoke_agent`, `gen_ai.input.messages`).
// MODE `ai5`:    AI SDK 5 (`ai5` = npm:ai@5, with `ai-sdk-openai-2` = npm:@ai-sdk/openai@2,
//                provider spec v2) and its built-in telemetry: the `ai.*` spans with
//                `ai.prompt.messages`, sent to the globally registered tracer provider.
// MODE `ai6`:    AI SDK 6 (`ai6` = npm:ai@6, with `ai-sdk-openai-3` = npm:@ai-sdk/openai@3,
//                provider spec v3) and its built-in telemetry, likewise.
// AI SDK 7 records nothing with `experimental_telemetry` alone: spans come only from an
// integration registered with `registerTelemetry(...)`, so `legacy` and `otel` register one.
// AI SDK 5 and 6 have no registerTelemetry: `experimental_telemetry` alone turns their spans on.
// All four modes pass `experimental_telemetry: { isEnabled: true, recordInputs: true, ... }`.
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";

import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: { "base-url": { type: "string" }, out: { type: "string" } },
});
const mode = positionals[0];
// Per mode: the `ai` package and the @ai-sdk/openai matching its provider spec, by install name
// (the npm aliases in tests/js/package.json), and for AI SDK 7 the @ai-sdk/otel integration.
const MODES = {
  legacy: { ai: "ai", openai: "@ai-sdk/openai", integration: "LegacyOpenTelemetry" },
  otel: { ai: "ai", openai: "@ai-sdk/openai", integration: "OpenTelemetry" },
  ai5: { ai: "ai5", openai: "ai-sdk-openai-2" },
  ai6: { ai: "ai6", openai: "ai-sdk-openai-3" },
};
if (!Object.hasOwn(MODES, mode) || !values["base-url"] || !values.out) {
  process.stderr.write(
    `usage: record_ai_sdk.mjs ${Object.keys(MODES).join("|")} --base-url URL --out FILE\n`,
  );
  process.exit(2);
}
const spec = MODES[mode];
const { generateText, registerTelemetry } = await import(spec.ai);
const { createOpenAI } = await import(spec.openai);

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
trace.setGlobalTracerProvider(provider);
if (spec.integration) {
  const otel = await import("@ai-sdk/otel");
  registerTelemetry(new otel[spec.integration]());
}

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
