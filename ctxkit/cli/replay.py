"""``ctxkit replay``: recorded traffic through candidate managers, compared with what the agent
really sent."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from ctxkit.cli.errors import EXIT_FOUND_PROBLEM, EXIT_OK, UsageError
from ctxkit.cli.options import (
    check_seconds,
    check_writable_file,
    config_from_json,
    memory_limit,
)
from ctxkit.forms import FORMS

__all__ = ["PRESETS", "add_parser"]

DESCRIPTION = """\
Run recorded traffic through candidate context managers and see what each would have sent,
broken, cost and lost, beside what the agent really sent (`recorded`, always compared). The
recording is anything `ctxkit audit` reads, keyed into conversations the same way; each
manager gets a fresh instance per conversation, the agent's messages, and a view asked for
at every model call under that request's budget. Each candidate is contained as a
conformance target is (ctxkit help replay containment).
"""

EPILOG = """\
MANAGER is anything `ctxkit conformance` takes, optionally named (NAME=TARGET), or the
reference manager by name: reference (the default), reference:summarize,
reference:hierarchical, reference:recall (ctxkit help replay managers). A --config JSON or
--form after a --manager applies to that manager.

exit codes: 0 every candidate replayed every conversation with no required finding and
within every --fail-if; 1 one did not (a finding, a threshold, or it raised or stopped in a
conversation); 2 bad usage or input, or a candidate that cannot be loaded or built.

examples:
  ctxkit replay traces.jsonl --manager reference --manager reference:hierarchical
  ctxkit replay bodies.jsonl --manager mypkg.ctx:Window --config '{"max_messages": 20}'
  ctxkit replay traces/ --manager reference --fail-if 'tokens>recorded' --report-json r.json
  ctxkit replay bodies.jsonl --manager reference --price gpt-4o=2.5 --fail-if 'cost>1.1*recorded'
"""

TOPICS = {
    "figures": """\
what each view is measured for (every view, the recorded ones too, by the same code).
  findings         the audit's checks on each view, by the rules of the API the request
                   went to (pairs split, history reordered, system prompt dropped, ...)
                   and a view over its budget
  tokens sent      exact counts (tiktoken), per request and in all, against recorded
  billed           input tokens with the prefix repeated from the previous request
                   (what a prompt cache serves) at --cache-discount off
  prefix kept      of each request's tokens, the share the next request starts with
  references kept  of the identifiers, numbers, paths and quoted strings that the model's
                   next answer uses from earlier in the conversation, the share still in
                   the view it was given (verbatim, a summary included)
The budget of a view is the model's window less --output-tokens, or --budget. Where a
recording holds history the recorded manager made (a summary, a truncated message), that
cannot be rebuilt as the agent's: it is counted and the rest is replayed.
""",
    "managers": """\
the reference manager's presets, by name.
  reference                 the default: a window of the newest units, long outputs cut
  reference:summarize       the window plus a running summary of what it left out
  reference:hierarchical    older units as paragraphs, the oldest as one line each
  reference:recall          the window plus the left-out units the user asks about again
With no --manager, the reference manager is the candidate.
""",
    "containment": """\
what a candidate is held to: --timeout, --load-timeout, --memory-limit.
Each candidate runs as `ctxkit conformance` runs a target: in a worker process of its own,
each call within --timeout seconds (its first slow call given twice as long again), its
address space capped at --memory-limit, its output kept apart. A candidate that raises,
exits, is killed, hangs or runs out of memory stops in that conversation (said in one
sentence, its figures up to there) and starts afresh for the next; the other candidates and
the report are untouched, and the gate fails.
""",
    "gate": """\
--fail-if: a gate over each candidate's totals.
tokens>recorded, billed>1.1*recorded, cost>25, references<0.9, prefix<0.5 (metrics tokens,
billed, cost, references, prefix; a value is a number, recorded, or a factor of it). A
threshold whose figure is unknown (no --price for a model, no reference in any answer) fails
too, saying so: a gate that checked nothing is not green.
""",
}
"""``ctxkit help replay TOPIC``: what ``--help`` leaves out to fit a screen."""

ADVANCED = (
    "--output-tokens",
    "--cache-discount",
    "--load-timeout",
    "--memory-limit",
    "--shard",
    "--merge",
    "--jobs",
)
"""Options ``--help`` leaves out (``ctxkit help replay options`` lists them)."""

PRESETS: dict[str, dict[str, Any]] = {
    "reference": {},
    "reference:summarize": {"strategies": ["truncate_outputs", "truncate", "summarize"]},
    "reference:hierarchical": {"strategies": ["truncate_outputs", "hierarchical"]},
    "reference:recall": {"recall": {}},
}
"""The reference manager's strategies by name (``docs/memory.md``)."""


class _Manager(argparse.Action):
    """``--manager [NAME=]TARGET``: a new manager; ``--config`` and ``--form`` after it are
    its own."""

    def __call__(self, parser: Any, namespace: Any, value: Any, option: Any = None) -> None:
        managers = list(getattr(namespace, "managers", None) or [])
        name, sep, target = str(value).partition("=")
        if not sep or "/" in name or ":" in name:
            name, target = str(value), str(value)
        managers.append({"name": name, "target": target, "config": None, "form": None})
        namespace.managers = managers


class _Own(argparse.Action):
    """``--config`` / ``--form``: the latest ``--manager``'s."""

    def __call__(self, parser: Any, namespace: Any, value: Any, option: Any = None) -> None:
        managers = getattr(namespace, "managers", None)
        if not managers:
            parser.error(f"{option} applies to the --manager before it: give a --manager first")
        managers[-1][self.dest] = value


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    from ctxkit.cli.audit import add_window_option

    parser = commands.add_parser(
        "replay",
        help="run recorded traffic through candidate managers and compare what each sends",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    parser.add_argument(
        "paths", nargs="*", metavar="RECORDING", help="files or directories ctxkit audit reads"
    )
    parser.add_argument(
        "--manager", action=_Manager, metavar="[NAME=]TARGET", help="a manager to replay through"
    )
    parser.add_argument("--config", action=_Own, metavar="JSON", help="the manager's config")
    parser.add_argument("--form", action=_Own, choices=FORMS, help="its form (default: detected)")
    parser.add_argument(
        "--format", choices=("auto", "otlp", "bodies"), default="auto", help="the files' form"
    )
    parser.add_argument("--budget", type=int, metavar="TOKENS", help="every request's budget")
    parser.add_argument(
        "--output-tokens",
        type=int,
        default=4096,
        metavar="TOKENS",
        help="tokens kept for the answer when the budget is the model's window (4096)",
    )
    add_window_option(parser)
    parser.add_argument(
        "--cache-discount",
        type=float,
        default=0.9,
        metavar="SHARE",
        help="what a cached input token saves (0.9: billed at a tenth, as Anthropic's and "
        "OpenAI's newest models bill cache reads)",
    )
    parser.add_argument(
        "--price",
        type=_price,
        action="append",
        default=[],
        metavar="MODEL=DOLLARS",
        help="dollars per million input tokens of a model (by name or prefix): adds the cost",
    )
    parser.add_argument(
        "--fail-if",
        action="append",
        default=[],
        metavar="EXPR",
        help="fail past a threshold: tokens>recorded, billed>1.1*recorded, references<0.9, "
        "prefix<0.5, cost>25 (totals of each candidate)",
    )
    parser.add_argument("--jobs", type=int, default=1, metavar="N", help="worker processes")
    parser.add_argument(
        "--timeout", type=float, metavar="S", help="seconds a candidate's call may take (10)"
    )
    parser.add_argument(
        "--load-timeout",
        type=float,
        metavar="S",
        help="seconds loading (importing) a candidate may take (120)",
    )
    parser.add_argument(
        "--memory-limit",
        type=memory_limit,
        metavar="SIZE",
        help="cap on each candidate's address space, e.g. 2G, 512M; 0 or none: no cap (4G)",
    )
    parser.add_argument(
        "--shard", metavar="I/N", help="replay only shard I of N (by conversation key)"
    )
    parser.add_argument("--report-json", type=Path, metavar="F", help="write the JSON report")
    parser.add_argument(
        "--html", type=Path, metavar="F", help="write a self-contained HTML page with plots"
    )
    parser.add_argument(
        "--show-views",
        action="store_true",
        help="print the view each candidate would have sent where it first broke (content!)",
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="the RECORDINGs are JSON reports of shards: join them into one",
    )
    parser.with_topics(TOPICS, ADVANCED)
    parser.set_defaults(run=run, managers=[])


def _price(text: str) -> tuple[str, float]:
    """``--price MODEL=DOLLARS``."""
    model, sep, dollars = text.rpartition("=")
    try:
        value = float(dollars)
    except ValueError:
        value = -1.0
    if not sep or not model or not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not MODEL=DOLLARS (a model name or prefix, dollars per million "
            "input tokens: gpt-4o=2.5)"
        )
    return model, value


def _specs(args: argparse.Namespace) -> list[Any]:
    from ctxkit.replay.run import RECORDED, ManagerSpec

    specs = [ManagerSpec(RECORDED, RECORDED)]
    seen = {RECORDED}
    candidates = args.managers or [
        {"name": "reference", "target": "reference", "config": None, "form": None}
    ]
    for given in candidates:
        target, config = given["target"], {}
        if target in PRESETS:
            config = dict(PRESETS[target])
            target = "ctxkit.reference:mount"
        elif target.startswith("reference:"):
            raise UsageError(
                f"--manager {target}: no such reference preset; the presets: " + ", ".join(PRESETS)
            )
        if given["config"] is not None:
            config.update(config_from_json(given["config"]))
        name = given["name"]
        while name in seen:
            name += "'"
        seen.add(name)
        specs.append(ManagerSpec(name, target, config, given["form"]))
    return specs


def _shard(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    index, sep, count = text.partition("/")
    if not sep or not index.isdigit() or not count.isdigit() or not 0 < int(index) <= int(count):
        raise UsageError(f"--shard {text!r}: give I/N with 1 <= I <= N, e.g. --shard 2/4")
    return int(index), int(count)


def run(args: argparse.Namespace) -> int:
    from ctxkit.audit.terminal import printable
    from ctxkit.replay import report as reports
    from ctxkit.replay.spool import write_json

    for option, path in (("--report-json", args.report_json), ("--html", args.html)):
        if path is not None:
            check_writable_file(option, path)
    if not args.paths:
        raise UsageError("give a RECORDING to replay (a file or folder ctxkit audit reads)")
    try:
        thresholds = [reports.parse_threshold(text) for text in args.fail_if]
    except ValueError as exc:
        raise UsageError(f"--fail-if {exc}") from None
    views: dict[Any, Any] = {}
    if args.merge:
        report = _merged(args.paths)
    else:
        from ctxkit.replay.session import close_candidates

        try:
            report, views = _replayed(args)
        finally:
            close_candidates()
    print(reports.text_report(report))
    if args.show_views:
        for (name, key), (request, view) in views.items():
            print(f"\n{name} would have sent, in conversation {key} at request {request}:")
            print(printable(json.dumps(view, indent=2, ensure_ascii=False), lines=True))
    if args.report_json is not None:
        write_json(report, args.report_json)
    if args.html is not None:
        reports.write_html(report, args.html, views)
    failed = reports.failures(report, thresholds)
    for reason in failed:
        print(f"FAIL {reason}")
    return EXIT_FOUND_PROBLEM if failed else EXIT_OK


def _replayed(args: argparse.Namespace) -> tuple[dict[str, Any], dict[Any, Any]]:
    """The report of a replay, and the views of each candidate's first break (for
    --show-views and --html)."""
    from ctxkit.audit.files import UnknownFormat, spooled
    from ctxkit.replay.candidate import CannotLoad
    from ctxkit.replay.report import as_json
    from ctxkit.replay.session import (
        Options,
        Outcome,
        Recording,
        check_candidates,
        first_breaks,
        replay,
    )

    if args.budget is not None and args.budget <= 0:
        raise UsageError(f"--budget {args.budget}: give a positive number of tokens")
    if not 0 <= args.cache_discount <= 1:
        raise UsageError(f"--cache-discount {args.cache_discount}: give a share from 0 to 1")
    if args.jobs < 1:
        raise UsageError(f"--jobs {args.jobs}: give 1 or more")
    for option, seconds in (("--timeout", args.timeout), ("--load-timeout", args.load_timeout)):
        if seconds is not None:
            check_seconds(option, seconds)
    for name in args.paths:
        if name != "-" and not Path(name).exists():
            raise UsageError(f"{name}: no such file or directory")
    specs = _specs(args)
    shard = _shard(args.shard)
    options = Options(
        args.budget,
        args.output_tokens,
        dict(args.window),
        args.cache_discount,
        prices=dict(args.price),
        limits=_limits(args),
    )
    with contextlib.ExitStack() as stack:
        try:
            paths = stack.enter_context(spooled(args.paths))
            recording = Recording(
                paths,
                args.format,
                options.windows,
                shard=None if shard is None else (shard[0] - 1, shard[1]),
            )
        except UnknownFormat as exc:
            raise UsageError(str(exc)) from None
        if not recording.requests:
            skipped = len(recording.problems)
            raise UsageError(
                "no request to replay in "
                + ", ".join(args.paths)
                + (f" ({skipped} record(s) skipped: run ctxkit audit on it)" if skipped else "")
            )
        try:
            check_candidates(specs, options.limits)
        except CannotLoad as exc:
            raise UsageError(str(exc)) from None
        results, firsts = replay(
            recording,
            specs,
            options,
            jobs=args.jobs,
            total=recording.conversations,
            progress=_progress(recording.conversations),
            spooled=True,
        )
    notes = list(recording.notes)
    recorded = results[specs[0].name]
    unbudgeted = sum(budget is None for c in recorded for budget in c["budgets"])
    if unbudgeted:
        notes.append(
            f"{unbudgeted} request(s) of a model whose window is not known were asked for "
            "without a budget: give --budget or --window MODEL=TOKENS"
        )
    lost = sum(c["unreconstructed"] for c in recorded)
    if lost:
        notes.append(
            f"{lost} message(s) the recorded manager made (a summary, a truncation) cannot be "
            "rebuilt as the agent's and are not replayed"
        )
    shard_said = None if shard is None else f"{shard[0]}/{shard[1]}"
    outcome = Outcome(
        specs, results, recording.conversations, recording.problems, notes, shard_said
    )
    wanted = args.show_views or args.html is not None
    views = first_breaks(firsts, specs, options) if wanted else {}
    return as_json(outcome), views


def _limits(args: argparse.Namespace) -> Any:
    """What each candidate's worker is held to: ``--timeout``, ``--load-timeout``,
    ``--memory-limit`` (0: no cap), each :class:`~ctxkit.replay.candidate.Limits`' default
    when not given (read here, not when the parser is built: that imports nothing heavy)."""
    from ctxkit.replay.candidate import Limits

    given: dict[str, Any] = {}
    if args.timeout is not None:
        given["timeout"] = args.timeout
    if args.load_timeout is not None:
        given["load_timeout"] = args.load_timeout
    if args.memory_limit is not None:
        given["memory_limit"] = args.memory_limit or None  # 0: no cap
    return Limits(**given)


def _progress(total: int) -> Any:
    """Conversations done, on a terminal's stderr."""
    if not sys.stderr.isatty() or total < 2:
        return None
    counted = [0]

    def done(count: int) -> None:
        counted[0] += count
        print(f"\rreplayed {counted[0]}/{total} conversations", end="", file=sys.stderr)
        if counted[0] >= total:
            print(file=sys.stderr)

    return done


def _merged(paths: list[str]) -> dict[str, Any]:
    """Shards' JSON reports joined into one."""
    from ctxkit.replay.report import VERSION, merge

    parts = []
    for name in paths:
        try:
            part = json.loads(Path(name).read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise UsageError(f"--merge {name}: not a replay report: {exc}") from None
        if not isinstance(part, dict) or part.get("version") != VERSION:
            raise UsageError(f"--merge {name}: not a version {VERSION} replay report")
        parts.append(part)
    try:
        return merge(parts)
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"--merge: {exc}") from None
