"""``ctxkit audit``: check recorded model requests (OpenTelemetry GenAI traces, raw request
bodies) for what the conformance suite checks in a live manager."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ctxkit.cli.errors import UsageError
from ctxkit.cli.options import check_writable_file

__all__ = ["add_parser", "add_window_option", "window_entry"]

DESCRIPTION = """\
Check what an agent really sent to its model, from records it already keeps: each request
against the provider's rules (a tool result without its call, a call without its result, a
reasoning item or thinking block lost), and each request against the one before it in its
conversation (messages reordered, the system prompt or the newest user message dropped,
compactions, how much of the previous request's start was kept for the prompt cache, tokens
against the model's context window).
Each request is judged by the rules of the API it went to (ctxkit help audit apis).
"""

EPILOG = """\
PATH is a file, a directory, - for stdin, or a stream; each file is OTLP (the Collector's
file exporter) or JSON Lines of raw request bodies (ctxkit help audit inputs).

exit codes: 0 no conversation fails a required property; 1 one does (or, with --strict, a
recommended one); 2 bad usage or a file in neither form.

examples:
  ctxkit audit traces.jsonl
  ctxkit audit traces/ --report-json audit.json --junit audit.xml
  ctxkit audit requests.jsonl --format bodies --window my-model=32000
"""

TOPICS = {
    "inputs": """\
what PATH may be, and the two forms a file is in.
PATH is a file, a directory (every file in it, as the file exporter rotates them; an empty
one is a note), - for stdin, or a stream (a FIFO, <(...)); gzip files are read as they are, up
to any damage. A record that does not read (a field of the wrong type included) is skipped
with its file:line; a span or request line read twice counts once. Files are read twice, as
a stream (first to learn where each conversation ends): memory holds a window of them and the
conversations in flight, not all of them. Each file is in one of two forms, told from its
first record (--format says it):
  OTLP          what the OpenTelemetry Collector's file exporter writes: one OTLP/JSON
                export request of traces or logs per line, or, with format: proto or
                compression: zstd, each export after its length. GenAI spans and
                events in every form in use (gen_ai.input.messages, OpenLLMetry's
                gen_ai.prompt.N, OpenInference's llm.input_messages.N, the Vercel AI
                SDK's ai.prompt.messages, per-message gen_ai.*.message events).
  bodies        JSON Lines of raw request bodies: OpenAI Chat Completions and Responses,
                Anthropic Messages, Gemini generateContent, Bedrock Converse; a line may wrap
                its body as {"timestamp", "body", "usage"}.
""",
    "apis": """\
how each request is judged by the rules of the API it went to.
Chat Completions, Responses, Anthropic Messages, Gemini, Bedrock Converse: told from what
the recording says (the messages' shape, a recorded request body, the span name, the
provider) and said beside each finding; a request whose API is not recorded, by the rules
every API shares. Only model calls are requests: agent, workflow and chain spans are not.
""",
    "keys": """\
how requests are joined into conversations.
Conversations are keyed by gen_ai.conversation.id, then session.id, then a body's
conversation id (metadata.conversation_id, or a top-level conversation_id), then by
inference (one trace; a request that extends an earlier one); the report says which rule
keyed each. Requests are checked in time order.
""",
    "content": """\
what each instrumentation needs to record the messages.
OpenTelemetry's openai-v2 needs OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY
and OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental; OpenLLMetry records by default
(TRACELOOP_TRACE_CONTENT=true); OpenInference by default (OPENINFERENCE_HIDE_INPUTS unset);
the Vercel AI SDK with experimental_telemetry: { isEnabled: true }. A call recorded without
content is skipped, with the setting that would record it.
""",
}
"""``ctxkit help audit TOPIC``: what ``--help`` leaves out to fit a screen."""


def window_entry(text: str) -> tuple[str, int]:
    """``--window MODEL=TOKENS``."""
    model, sep, tokens = text.rpartition("=")
    if not sep or not model or not tokens.isdigit() or int(tokens) <= 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not MODEL=TOKENS (a model name or prefix, a positive number)"
        )
    return model, int(tokens)


def add_window_option(parser: argparse.ArgumentParser) -> None:
    """``--window MODEL=TOKENS``, repeatable: audit and watch take it alike."""
    parser.add_argument(
        "--window",
        type=window_entry,
        action="append",
        default=[],
        metavar="MODEL=TOKENS",
        help="a model's context window (by name or name prefix), over the built-in table",
    )


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "audit",
        help="check recorded requests (GenAI traces, request logs) for broken context",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    parser.add_argument(
        "paths", nargs="+", metavar="PATH", help="files or directories to read (- for stdin)"
    )
    parser.add_argument(
        "--format",
        choices=("auto", "otlp", "bodies"),
        default="auto",
        help="the files' form (default: told from each file's first record)",
    )
    parser.add_argument("--report-json", type=Path, metavar="F", help="write the JSON report")
    parser.add_argument("--junit", type=Path, metavar="F", help="write JUnit XML for CI views")
    parser.add_argument("--html", type=Path, metavar="F", help="write a self-contained HTML page")
    add_window_option(parser)
    parser.add_argument(
        "--strict", action="store_true", help="recommended properties fail the run too"
    )
    parser.add_argument(
        "--show-content",
        action="store_true",
        help="print the messages each finding involves (content is never printed otherwise)",
    )
    parser.add_argument("--verbose", action="store_true", help="list passing conversations too")
    parser.with_topics(TOPICS)
    parser.set_defaults(run=run)


def _progress() -> Any:
    """A Rich progress bar on a terminal's stderr; None elsewhere."""
    if not sys.stderr.isatty():
        return None
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        transient=True,
        console=Console(stderr=True),
    )


def run(args: argparse.Namespace) -> int:
    from ctxkit.audit.files import UnknownFormat, files_of
    from ctxkit.audit.in_flight import audit_files
    from ctxkit.audit.report import summary_lines, write_html, write_json, write_junit

    for option, path in (
        ("--report-json", args.report_json),
        ("--junit", args.junit),
        ("--html", args.html),
    ):
        if path is not None:
            check_writable_file(option, path)
    for name in args.paths:
        if name != "-" and not Path(name).exists():
            raise UsageError(f"{name}: no such file or directory")
        if Path(name).is_dir() and not files_of([name]):
            raise UsageError(f"{name}: a directory with no file in it")
    progress = _progress()
    tasks: dict[tuple[str, str], Any] = {}

    def advance(reading: str, path: str, done: int) -> None:
        if progress is None or path == "-":
            return
        if (reading, path) not in tasks:
            size = Path(path).stat().st_size
            tasks[(reading, path)] = progress.add_task(f"{reading} {path}", total=size)
        progress.update(tasks[(reading, path)], completed=done)

    try:
        if progress is not None:
            progress.start()
        # read twice, holding the conversations in flight (see ctxkit.audit.in_flight)
        outcome = audit_files(
            args.paths,
            args.format,
            windows=dict(args.window),
            strict=args.strict,
            show_content=args.show_content,
            progress=advance,
        )
    except UnknownFormat as exc:
        raise UsageError(str(exc)) from None
    finally:
        if progress is not None:
            progress.stop()
    for line in summary_lines(outcome, verbose=args.verbose):
        print(line)
    if args.report_json is not None:
        write_json(outcome, args.report_json)
    if args.junit is not None:
        write_junit(outcome, args.junit)
    if args.html is not None:
        write_html(outcome, args.html)
    if not outcome.tally.requests:  # reports written: they say the same
        raise UsageError(outcome.nothing_audited())
    return outcome.exit_code
