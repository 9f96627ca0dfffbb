"""``ctxkit conformance``: its options, its progress lines and its report.

The suite (and Hypothesis) is imported only when this command runs, so ``ctxkit --help``
stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import time
from pathlib import Path
from typing import Any

from ctxkit.cli.errors import (
    EXIT_FOUND_PROBLEM,
    EXIT_INCONCLUSIVE,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
)
from ctxkit.cli.options import (
    DEFAULT_SEED,
    check_seconds,
    check_writable_file,
    config_from_json,
    memory_limit,
    shape_list,
)
from ctxkit.cli.signals import terminated_as_interrupt
from ctxkit.conformance.schedule import DEFAULT as DEFAULT_SCHEDULE
from ctxkit.conformance.schedule import DEFAULT_MAX_TOKENS, SCHEDULES
from ctxkit.forms import FORMS

EXIT_PASS = EXIT_OK
EXIT_REQUIRED_FAILED = EXIT_FOUND_PROBLEM
EXIT_CANNOT_LOAD = EXIT_USAGE

DESCRIPTION = """\
Check a context manager against the conformance properties with property-based tests.
The target runs in a child process; each operation gets --timeout seconds, the whole run
--deadline seconds. A failure shows the property, one plain sentence, and the shrunk calls
as a verified script that reproduces it. TARGET: module:attr, a file, an adapter's name, a
.mjs file, grpc://HOST:PORT, or nothing for the reference manager (ctxkit help conformance
targets).
"""

EPILOG = """\
exit codes: 0 every required property holds; 1 a required property failed or could not be
checked (a hang, a crash); 2 the target could not be loaded, or bad usage; 4 inconclusive:
every required property held, but no view was ever compacted.

examples:
  ctxkit conformance                                  # the reference manager
  ctxkit conformance mypkg.context:SlidingWindow --config '{"max_tokens": 8000}'
  ctxkit conformance ep:context-simple --profile thorough --report-json report.json
  ctxkit conformance ./my_manager.py --seed 42 --shapes anthropic --junit junit.xml
  ctxkit conformance ./manager.mjs:SlidingWindow --config '{"maxTokens": 8000}'
  ctxkit conformance mypkg.agent:trim_history         # a function over the message list
  ctxkit conformance mypkg.agent:make_session --form session
  ctxkit conformance --command "./my-manager-harness --mode=strict"
"""

TOPICS = {
    "targets": """\
what TARGET may be.
  module:attr         a class or zero-argument factory (called with --config as keywords),
                      or a mount(coordinator, config) function
  module              a module with a mount() function
  ep:NAME             an installed amplifier.modules entry point
  path/to/file.py[:attr]
  ADAPTER             a popular library's trimmer by short name, e.g. langchain:trim_messages
                      (see --list-adapters)
  grpc://HOST:PORT    an Amplifier context module served through amplifier-core's gRPC
                      ContextService (pip install 'ctxkit-llm[grpc]')
  path/to/manager.mjs[:Export]
                      a JavaScript class or factory, run by ctxkit's Node harness
                      (default export without :Export; .js and .cjs too; Node.js 18+)
  (nothing)           ctxkit's reference manager

Any other language: --command "PROGRAM ARGS" starts a program that speaks ctxkit's
conformance protocol (JSON lines on two pipes; see PROTOCOL.md in the installed
ctxkit/conformance/spec/ folder, or conformance/PROTOCOL.md in the repository); TARGET, if
given, is passed to it in the handshake.
""",
    "forms": """\
the four forms a TARGET takes (detected, or given with --form).
  contract            a context manager's class, factory or mount function
  function            a function over the message list, e.g. trim(messages) or
                      trim(messages, token_budget=None), sync or async, returning the view:
                      ctxkit keeps the history and calls it (on a copy) before every request,
                      as pydantic-ai's history_processors and LangGraph's pre_model_hook are;
                      --config keys are its keyword arguments. JavaScript: (messages,
                      { tokenBudget }) => view
  session             an OpenAI Agents SDK Session (add_items, get_items, pop_item,
                      clear_session), or its class or factory: each view is get_items(limit)
                      with the session's own session_settings.limit, as Runner reads it
  compacting          a manager of Amplifier's first contract (add_message, get_messages,
                      should_compact, compact, clear), or its class or factory: each view is
                      compact() when should_compact(), then get_messages(); non_destructive is
                      n/a, since compact() rewrites the stored history by that contract
""",
    "relaxations": """\
what --allow relaxes (repeatable or comma-separated).
  hoisted-system      ordering: system messages may move to the front of the view
  dropped-system      preservation: system messages may be dropped from a view (or merged)
  merged-system       preservation: system messages may be merged into one
  budget-tolerance=R  budget: a view may exceed the budget by the ratio R (e.g. 0.05)
""",
    "time": """\
how a run keeps to its time: --deadline, --timeout, --load-timeout.
Every run ends by --deadline with a report; loading (importing) the target counts against
it, and may take --load-timeout seconds (by default, the rest of the deadline). A search cut
short keeps the smallest failure it saw, and the other properties pass with how far the run
got. A call that hangs past --timeout or crashes the target costs the property it was made
for; the target is restarted and the rest go on. A run asked for --report-json or --junit
writes it however the run ends: a target that cannot be loaded or does not load in time, an
interrupt (Ctrl-C, SIGTERM) or ctxkit's own error is a report with verdict error and the
reason.
""",
    "reproducers": """\
the script each failure comes with (--reproducers DIR writes them).
Each failure's script is a pytest test file, test_<property>_<target>.py, that also runs
with python (a non-zero exit while the bug is there). A Python target is imported and built
as a test of your own would (from mypkg.context import SlidingWindow; SlidingWindow(**CONFIG)).
What it needs of the folder the run started in (a module found only there, a file named as
TARGET) it finds from that folder: written by --reproducers DIR, a path relative to its own
file, so DIR can be committed with the project; the JSON report's text reads
CTXKIT_PROJECT_ROOT, else the current folder. Its calls are as few as still fail (each call
left is needed) and each view's budget the largest that still fails. It is run once in a
fresh process before it is shown: the report says "verified" or why not. Calls that crash
the target are a finding too, reproduced by a script that ends the same way.
""",
    "containment": """\
what the target's process is held to: a supervisor, --memory-limit, its output kept apart.
The target runs in a process of its own under a supervisor; anything it starts (children,
double-forked daemons) ends with it, and with ctxkit, however ctxkit ends. Its output is
kept to the first and last MiB. Its address space is capped: --memory-limit SIZE (4G by
default; e.g. 2G, 512M; 0 or none for no cap); a target past the cap is reported as
exceeding the memory limit, not as a hang or a crash.
""",
    "coverage": """\
why a pass means the manager was tested where it compacts (--max-tokens).
The report says how many views were compacted and the largest history in tokens. When no
view of the search was compacted, one history is grown (doubling, up to --max-tokens) until
the manager compacts, and the search goes on from that size; a manager that never compacts
is inconclusive (exit 4), not a pass.
""",
}
"""``ctxkit help conformance TOPIC``: what ``--help`` leaves out to fit a screen."""

ADVANCED = (
    "--command",
    "--schedule",
    "--jobs",
    "--load-timeout",
    "--max-tokens",
    "--memory-limit",
    "--protocol-log",
    "--no-verify",
    "--shrink-seconds",
)
"""Options ``--help`` leaves out (``ctxkit help conformance options`` lists them)."""


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "conformance",
        help="check any context manager against the conformance properties",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    parser.add_argument(
        "target",
        nargs="?",
        metavar="TARGET",
        help="what to check (ctxkit help conformance targets)",
    )
    parser.add_argument(
        "--command",
        dest="implementation",  # `command` is the CLI's subcommand
        metavar="CMD",
        help="a program that speaks the conformance protocol, with its arguments (one "
        "string, split as a shell would); it holds the manager, in any language",
    )
    parser.add_argument(
        "--config", default="{}", metavar="JSON", help="keyword arguments or mount() config"
    )
    parser.add_argument(
        "--form",
        choices=FORMS,
        help="the form TARGET takes (default: detected; ctxkit help conformance forms)",
    )
    parser.add_argument(
        "--seed",
        type=_seed,
        default=DEFAULT_SEED,
        metavar="N|random",
        help=f"Hypothesis seed ({DEFAULT_SEED}: the same command gives the same verdict, case "
        "and sentence); 'random' explores with a new one, printed so it can be repeated",
    )
    parser.add_argument("--max-examples", type=int, metavar="N", help="runs per search")
    parser.add_argument(
        "--shrink-seconds",
        type=float,
        default=20.0,
        metavar="S",
        help="seconds Hypothesis may shrink a failure per search, in the overlap and serial "
        "schedules (20); ctxkit's own minimizer then removes every step, call and character "
        "the failures do not need, exchanging at most 25 MB with the target each (60 s for all "
        "of them)",
    )
    parser.add_argument(
        "--profile",
        choices=["quick", "default", "thorough"],
        default="default",
        help="how hard to search: examples per property (quick 25, default 80, thorough 300 "
        "for a release) and steps per example (30, 50, 80)",
    )
    parser.add_argument(
        "--schedule",
        choices=list(SCHEDULES),
        default=DEFAULT_SCHEDULE,
        help="how the run searches and what runs beside. single (default): one search that "
        "notes every failure and goes on to its last example, then ctxkit's minimizer makes "
        "each small; the cache loop and the verifications run beside it. overlap: the "
        "schedule before single, each failure ends a search, Hypothesis shrinks it "
        "(--shrink-seconds) and a new search looks for the rest; the same work beside. "
        "serial: overlap's searches with nothing beside, one worker at a time (slowest; for "
        "a target whose instances share a file or a database)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="split a long search (40+ examples) over N processes, each with a worker and a "
        "seed of its own (1): faster on N cores, but each share is a shorter search, which "
        "reaches shorter histories (a fault that needs 40+ messages can be missed); the "
        "answer for a seed depends on N, not on the machine's cores",
    )
    parser.add_argument(
        "--timeout", type=float, default=10.0, metavar="S", help="seconds per operation (10)"
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=300.0,
        metavar="S",
        help="seconds the whole run may take (300); it always ends by then, with a report",
    )
    parser.add_argument(
        "--load-timeout",
        type=float,
        metavar="S",
        help="seconds loading (importing) the target may take; it counts against --deadline "
        "(default: the rest of the deadline)",
    )
    parser.add_argument(
        "--budget",
        dest="fallback_budget",
        type=int,
        metavar="N",
        help="the manager's own budget, for requests that name none (default: the config's "
        "max_tokens)",
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=DEFAULT_MAX_TOKENS,
        metavar="N",
        help="when fewer than one view in 20 of the search was compacted, a history is grown "
        "toward N tokens to find the size where the manager compacts, and the search goes on "
        f"from there ({DEFAULT_MAX_TOKENS:,})",
    )
    parser.add_argument(
        "--memory-limit",
        type=memory_limit,
        metavar="SIZE",
        help="cap on the target's address space, e.g. 2G, 512M; 0 or none: no cap (4G)",
    )
    parser.add_argument(
        "--shapes",
        type=shape_list,
        default=None,
        metavar="SHAPES",
        help="the message shapes to judge it in: openai, anthropic, responses, gemini, "
        "bedrock, genai, a comma-separated list, or all (default: the shapes it speaks)",
    )
    parser.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="RELAXATION",
        help="a property relaxed (ctxkit help conformance relaxations)",
    )
    parser.add_argument("--report-json", type=Path, metavar="PATH", help="write the JSON report")
    parser.add_argument("--junit", type=Path, metavar="PATH", help="write a JUnit XML report")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="recommended properties fail the run too (exit code, JUnit, JSON), not only "
        "required ones",
    )
    parser.add_argument(
        "--reproducers",
        type=Path,
        metavar="DIR",
        help="write each failure's reproducer into DIR as test_<property>_<target>.py: "
        "`pytest DIR` runs them",
    )
    parser.add_argument(
        "--list-adapters",
        action="store_true",
        help="list the adapters for popular libraries (TARGET short names) and exit",
    )
    parser.add_argument(
        "--protocol-log",
        type=Path,
        metavar="PATH",
        help="write every protocol request and answer to PATH as JSON lines, for authors of "
        "implementations in other languages",
    )
    parser.add_argument(
        "--no-verify",
        dest="verify",
        action="store_false",
        help="do not run each reproducer in a fresh process to check that it fails",
    )
    parser.with_topics(TOPICS, ADVANCED)
    parser.set_defaults(run=run_conformance)


def list_adapters() -> int:
    """Each adapter's short name, library (installed version, or how to install it) and what
    it calls."""
    from ctxkit.adapters import ADAPTERS, JS_ADAPTERS, installed_version, npm_version

    rows = [
        (a.name, a.distribution, installed_version(a), a.install, a.description) for a in ADAPTERS
    ] + [(a.name, a.package, npm_version(a.package), a.install, a.description) for a in JS_ADAPTERS]
    width = max(len(row[0]) for row in rows)
    for name, library, found, install, description in rows:
        state = f"{library} {found}" if found else f"{library} not installed ({install})"
        print(f"{name:<{width}}  {state}\n{'':<{width}}  {description}")
    return EXIT_PASS


def run_conformance(args: argparse.Namespace) -> int:
    if args.list_adapters:
        return list_adapters()
    config = config_from_json(args.config)
    check_seconds("--timeout", args.timeout)
    check_seconds("--deadline", args.deadline)
    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    check_seconds("--shrink-seconds", args.shrink_seconds)
    if args.load_timeout is not None:
        check_seconds("--load-timeout", args.load_timeout)
    if args.max_examples is not None and args.max_examples < 1:
        raise UsageError(f"--max-examples must be at least 1, got {args.max_examples}")
    if args.fallback_budget is not None and args.fallback_budget < 1:
        raise UsageError(f"--budget must be at least 1, got {args.fallback_budget}")
    if args.max_tokens < 1:
        raise UsageError(f"--max-tokens must be at least 1, got {args.max_tokens}")
    for option, path in (
        ("--report-json", args.report_json),
        ("--junit", args.junit),
        ("--protocol-log", args.protocol_log),
    ):
        if path is not None:
            check_writable_file(option, path)

    from ctxkit.conformance.runner import RunOptions
    from ctxkit.conformance.targets.sandbox import (
        DEFAULT_MEMORY_LIMIT,
        SandboxUnavailable,
        require_linux,
    )

    try:
        require_linux()
    except SandboxUnavailable as exc:
        raise UsageError(str(exc)) from None

    seed = random.randrange(1, 2**31) if args.seed == "random" else args.seed
    options = RunOptions(
        target=args.target,
        implementation=args.implementation,
        config=config,
        seed=seed,
        profile=args.profile,
        max_examples=args.max_examples,
        shrink_seconds=args.shrink_seconds,
        schedule=args.schedule,
        jobs=args.jobs,
        timeout=args.timeout,
        deadline=args.deadline,
        shapes=args.shapes,
        allow=list(args.allow),
        fallback_budget=args.fallback_budget,
        max_tokens=args.max_tokens,
        verify=args.verify,
        form=args.form,
        load_timeout=args.load_timeout,
        memory_limit=(
            DEFAULT_MEMORY_LIMIT if args.memory_limit is None else args.memory_limit or None
        ),
    )
    with contextlib.ExitStack() as stack:
        if args.protocol_log is not None:
            options.transcript = stack.enter_context(args.protocol_log.open("w", encoding="utf-8"))
        return _run(options, args)


def _run(options: Any, args: argparse.Namespace) -> int:
    """Run the suite with its progress on stderr, then print and write the report."""
    from ctxkit.conformance.reports.formats import summary
    from ctxkit.conformance.runner import SetupError, run, stopped

    seed = options.seed
    ticker = _Ticker(live=sys.stderr.isatty())
    name = args.target or (
        f"the target of {args.implementation!r}"
        if args.implementation
        else "ctxkit.reference:mount (the reference manager)"
    )
    how = "random" if args.seed == "random" else "fixed; --seed random explores"
    print(f"ctxkit conformance: checking {name}, seed {seed} ({how})", file=sys.stderr, flush=True)
    started = time.monotonic()
    try:
        with terminated_as_interrupt():
            report = run(options, progress=lambda line: _line(f"  {line}", ticker), tick=ticker)
    except SetupError as exc:
        print(f"ctxkit: cannot check: {exc}", file=sys.stderr)
        _write_reports(stopped(options, str(exc), started), args)
        return EXIT_CANNOT_LOAD
    except KeyboardInterrupt:
        _write_reports(stopped(options, "interrupted before the run ended", started), args)
        raise
    except Exception as exc:
        reason = f"ctxkit's internal error: {type(exc).__name__}: {exc}"
        _write_reports(stopped(options, reason, started), args)
        raise
    _line("", ticker)
    if args.strict:
        report.make_strict()
    print(summary(report, reproducers=args.reproducers))
    _write_reports(report, args)
    if args.reproducers:
        _write_reproducers(report, args.reproducers)
    return exit_code(report.verdict)


def _write_reports(report: Any, args: argparse.Namespace) -> None:
    """The reports asked for (``--report-json``, ``--junit``)."""
    from ctxkit.conformance.reports.formats import write_json, write_junit

    if args.report_json:
        write_json(report, args.report_json)
    if args.junit:
        write_junit(report, args.junit)


def _write_reproducers(report: Any, folder: Path) -> None:
    """Each finding's reproducer as a pytest file (:func:`~ctxkit.conformance.reports.reproducer.
    file_name`), so ``pytest DIR`` collects them, finding the run's folder from where it is
    (:func:`~ctxkit.conformance.reports.reproducer.placed`)."""
    from ctxkit.conformance.reports.reproducer import file_name, placed

    folder.mkdir(parents=True, exist_ok=True)
    for result in report.properties:
        if result.reproducer:
            path = folder / file_name(result.id, report.target)
            path.write_text(placed(result.reproducer, folder), encoding="utf-8")
            print(f"ctxkit: wrote {path}", file=sys.stderr)


def exit_code(verdict: str) -> int:
    """0 when every required property holds; 1 when one failed or could not be checked; 4
    when every one held but the manager never compacted (inconclusive)."""
    if verdict == "inconclusive":
        return EXIT_INCONCLUSIVE
    return EXIT_PASS if verdict == "pass" else EXIT_REQUIRED_FAILED


class _Ticker:
    """Progress while the search runs: on a terminal a live 'examples, examples a second,
    steps, seconds' counter redrawn at most 5 times a second; elsewhere (CI logs) the same as
    a line every 15 seconds."""

    def __init__(self, live: bool) -> None:
        self.live = live
        self.started = time.monotonic()
        self.shown = self.started
        self.active = False

    def __call__(self, examples: int, steps: int) -> None:
        now = time.monotonic()
        if now - self.shown < (0.2 if self.live else 15.0):
            return
        self.shown = now
        elapsed = now - self.started
        rate = examples / elapsed if elapsed else 0.0
        text = f"    {examples:,} examples ({rate:.1f}/s), {steps:,} steps, {elapsed:.0f} s"
        if self.live:
            self.active = True
            sys.stderr.write(f"\r{text} ")
        else:
            sys.stderr.write(f"{text}\n")
        sys.stderr.flush()


def _line(text: str, ticker: _Ticker) -> None:
    """Print a progress line, first clearing a live counter if one is shown."""
    if ticker.active:
        sys.stderr.write("\r" + " " * 79 + "\r")
        ticker.active = False
    if text:
        print(text, file=sys.stderr, flush=True)


def _seed(text: str) -> int | str:
    """``--seed``: a whole number, or ``random``."""
    if text == "random":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither a whole number nor 'random'"
        ) from None
