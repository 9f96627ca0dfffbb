"""Runs the suite against one target and decides a status per property.

One Hypothesis search checks every property at once. Each failure is shrunk on its own (each
property raises its own exception type); the failed properties are then set aside and the
search runs again for the rest, until a search finds nothing new. A passing target costs one
search.

Whatever the target does, the run ends by its deadline with a report:

* a hang, a crash or garbage in the protocol costs the property the call was made for (a call
  made for no one property costs ``lifecycle``); the worker is restarted and the other
  properties go on; after a few such stops the rest are reported as not checked;
* when the deadline comes, a search stops where it is: failures seen so far stand (the
  smallest of each), the other properties pass with a note of how far the run got;
* a target that answers the same calls differently has its failures reported as seen, never
  as an error of the suite.

Loading the target counts against the deadline too, within ``load_timeout``
(``--load-timeout``; by default the rest of the deadline). A run that ends before it judges
anything (a load that fails or times out, an interrupt) has a report all the same:
:func:`stopped`.

After the searches, each failure is made smaller (:mod:`.minimize`): its steps, then its calls,
one at a time until none can go, then its views' budgets, raised to the largest that still
fails; a crash's calls too, kept only while they end the process the same way. Each
reproducer script is then run in a fresh process to check that it fails (:mod:`.verify`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shlex
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.configuration import set_hypothesis_home_dir, storage_directory
from hypothesis.errors import FlakyFailure, HypothesisException, UnsatisfiedAssumption
from hypothesis.stateful import run_state_machine_as_test

from ctxkit.conformance.judge.allow import RelaxationError, parse_allow
from ctxkit.conformance.judge.catalogue import PROPERTIES
from ctxkit.conformance.judge.invariants import ANNOTATION_KEYS
from ctxkit.conformance.judge.steps import Check
from ctxkit.conformance.reports.phases import Phases
from ctxkit.conformance.reports.reproducer import (
    Build,
    Reproduction,
    file_name,
    render_script,
    render_steps,
)
from ctxkit.conformance.reports.results import Coverage, PropertyResult, Report, Status
from ctxkit.conformance.reports.verify import Verifier
from ctxkit.conformance.schedule import DEFAULT as DEFAULT_SCHEDULE
from ctxkit.conformance.schedule import DEFAULT_MAX_TOKENS, SCHEDULES
from ctxkit.conformance.search.cache_stability import measure_stability
from ctxkit.conformance.search.machine import (
    OWN_BUDGET,
    ConformanceMachine,
    DeadlineReached,
    PropertyFailure,
    Session,
    SteeredMachine,
    TargetStopped,
    growth_turn_tokens,
)
from ctxkit.conformance.search.minimize import NOT_REPEATED, CallShrinker, minimize
from ctxkit.conformance.shards import Shards, Share, search_elsewhere, split
from ctxkit.conformance.targets.load import DEFAULT_TARGET, config_hint
from ctxkit.conformance.targets.routes import RouteError, route_for
from ctxkit.conformance.targets.worker_client import (
    CLOSE_GRACE_S,
    DEFAULT_MEMORY_LIMIT,
    Child,
    TargetUnusable,
    during,
    first_grace,
)
from ctxkit.exact import exact_form
from ctxkit.prefix import AGENT_LOOP_STEPS
from ctxkit.shapes.spoken import ShapeError, Spoken, decide, format_name, parse_shapes, split_config

__all__ = ["PROFILES", "PropertyResult", "Report", "RunOptions", "SetupError", "run", "stopped"]

PROFILES = {
    "quick": {"max_examples": 25, "stateful_step_count": 30},
    "default": {"max_examples": 80, "stateful_step_count": 50},
    "thorough": {"max_examples": 300, "stateful_step_count": 80},
}

DEFAULT_DEADLINE = 300.0
"""Seconds a whole run may take, by default (``--deadline``)."""

CACHE_LOOP_AFTER = 5.0
"""Seconds the prompt-cache loop beside the searches may go on after they and the minimizing
end; a loop that has not reached its views by then is not judged, and the summary says so."""

MINIMIZE_WORK = 25_000_000
"""Bytes each failure's minimizing may exchange with the target, for its steps and again for
its calls (:attr:`~ctxkit.conformance.search.machine.Session.work_left`): work, not seconds,
bounds it, so the smallest case is the same on every run. The zoo's longest, LateSplitter,
needs 15 MB; a failure found in a history grown past 100,000 tokens took 154 MB to drop
every turn it could, and 400 replays of it (the bound before, in replays) took minutes."""

CUT_SHORT = (
    "made smaller for as long as the run allowed (--deadline, a busy machine), not to the end: "
    "another run may show a smaller case"
)
"""A failure's note when time, not :data:`MINIMIZE_WORK`, ended its minimizing."""

VERIFIERS = 2
"""Reproducers verified at once, each in a fresh process: a target whose library takes 6 s
to import (litellm) had its four verifications end the run one after another, 25 s."""

RARELY_COMPACTED = 20
"""A search that saw fewer than one compacted view in this many is steered toward the size
where the target compacts (:meth:`_Search.steer`)."""

GROWN_BISECTIONS = 3
"""Halvings of the gap between the last size a growing history was seen whole and the
size at which it compacted (:meth:`_Search._narrow`): within an eighth of it."""

STEERED_SHARE = 8
"""A steered search runs an eighth of the profile's examples (at least 10): each begins
with a history of tens of thousands of tokens and stays that large
(:class:`~ctxkit.conformance.search.machine.SteeredMachine`), so 10 examples of 50 steps
compact hundreds of views."""

MAX_STOPS = 3
"""Hangs, crashes or protocol breaks after which the properties left are not checked."""

LOAD_TIMEOUT = 60.0
"""Seconds loading the target may take when neither ``--load-timeout`` nor a finite deadline
bounds it."""


NOT_APPLICABLE = {
    "function": {
        "robustness": "a function target never holds the history: ctxkit's wrapper does, and "
        "it validates each message before it is stored, so this would judge ctxkit",
        "isolation": "a function target never holds the history: ctxkit's wrapper does, and "
        "it passes the function a copy of the history, so this would judge ctxkit",
    },
    "compacting": {
        "non_destructive": "compact() rewrites the stored history by Amplifier's first "
        "contract: get_messages() is what a request sends, and ctxkit keeps what was added "
        "beside it",
    },
}
"""Per form, the properties that do not apply to it, and why (:mod:`ctxkit.forms`)."""


HELLO_SOURCES = ("declared", "adapter", "amplifier", "form")
"""Where an implementation's ``hello`` may say the shapes it speaks come from."""


class SetupError(Exception):
    """The target could not be loaded, or the options are wrong: exit code 2."""


@dataclass
class RunOptions:
    target: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    seed: int = 1
    """The CLI's and the plugin's default too (``ctxkit.cli.options.DEFAULT_SEED``)."""
    profile: str = "default"
    max_examples: int | None = None
    timeout: float = 10.0
    """Seconds each operation on the target may take."""
    deadline: float = DEFAULT_DEADLINE
    """Seconds the whole run may take; it always ends by then, with a report."""
    shapes: tuple[str, ...] | None = None
    """``--shapes``: the message shapes to judge the target in; None: the shapes it speaks,
    as :mod:`ctxkit.shapes.spoken` decides them."""
    allow: list[str] = field(default_factory=list)
    fallback_budget: int | None = None
    """The budget a request without one should fit, if known; by default the config's
    ``max_tokens``."""
    max_rounds: int = 6
    schedule: str = DEFAULT_SCHEDULE
    """``--schedule``: how the run spends its time (:mod:`ctxkit.conformance.schedule`)."""
    jobs: int = 1
    """``--jobs``: processes a long search is split over (:mod:`ctxkit.conformance.shards`);
    the ``serial`` schedule searches in one. Faster on several cores, but each share searches
    shorter histories; not the machine's cores, since the answer for a seed depends on it."""
    only: frozenset[str] | None = None
    """The properties to search, of those a run checks (None: all); the others are not
    checked. For a share of a search run elsewhere."""
    found_by: str | None = None
    """The command line reproducers cite (None: :attr:`command`, this run's own)."""
    shrink_seconds: float = 20.0
    """Shrinking stops after this long per search; the counterexample found so far stands."""
    minimize_seconds: float = 60.0
    """ctxkit's minimizer and call shrinker are bounded by work (:data:`MINIMIZE_WORK`);
    this is the limit in time beside it, for all the failures of a run together, each given
    an equal share of what is left: met only by a slow target on a busy machine (a failure of
    100 messages of long tool outputs took 80 s to minimize whole), it keeps the smallest
    counterexample found by then and says so (:data:`CUT_SHORT`)."""
    verify: bool = True
    """Run each reproducer in a fresh process to check that it fails."""
    memory_limit: int | None = DEFAULT_MEMORY_LIMIT
    """Bytes of address space the target may use (None: no cap)."""
    implementation: str | None = None
    """``--command``: the program that speaks the protocol for the target (None: chosen by
    the target, see :mod:`ctxkit.conformance.targets.routes`)."""
    transcript: TextIO | None = None
    """``--protocol-log``: gets every protocol request and answer as a JSON line."""
    stability_steps: int = AGENT_LOOP_STEPS
    """Model calls in the agent loop that measures cache_stability (0: not measured)."""
    form: str | None = None
    """``--form``: ``contract``, ``function`` or ``session`` (None: detected; see
    :mod:`ctxkit.forms`)."""
    load_timeout: float | None = None
    """``--load-timeout``: seconds loading (importing) the target may take; None: the rest of
    the deadline (:data:`LOAD_TIMEOUT` when the deadline is unbounded). Loading counts against
    the deadline either way."""
    max_tokens: int = DEFAULT_MAX_TOKENS
    """``--max-tokens``: how large, in tokens, a history is grown when the searches never saw
    the target compact (:meth:`_Search.steer`)."""

    @property
    def command(self) -> str:
        """The command line that repeats this run."""
        parts = ["ctxkit", "conformance"]
        if self.implementation:
            parts += ["--command", self.implementation]
        if self.target:
            parts.append(self.target)
        if self.form:
            parts += ["--form", self.form]
        if self.config:
            parts += ["--config", json.dumps(self.config)]
        parts += ["--seed", str(self.seed)]
        if self.profile != "default":
            parts += ["--profile", self.profile]
        schedule = SCHEDULES.get(self.schedule)
        if self.schedule != DEFAULT_SCHEDULE:
            parts += ["--schedule", self.schedule]
        if self.jobs != 1 and schedule is not None and schedule.beside:
            parts += ["--jobs", str(self.jobs)]
        if self.shapes is not None:
            parts += ["--shapes", format_name(self.shapes)]
        for item in self.allow:
            parts += ["--allow", item]
        if self.fallback_budget is not None:
            parts += ["--budget", str(self.fallback_budget)]
        return shlex.join(parts)


def run(
    options: RunOptions,
    *,
    progress: Callable[[str], None] | None = None,
    tick: Callable[[int, int], None] | None = None,
) -> Report:
    """Run the suite. Raises :class:`SetupError` if the options are wrong or the target
    cannot be loaded.

    ``progress`` gets a line at each phase; ``tick`` gets (examples, steps) after every step.
    """
    with hypothesis_files_in_cache():
        return _run(options, progress=progress, tick=tick)


def hypothesis_cache_dir() -> Path:
    """Where the suite's Hypothesis files go: ``$XDG_CACHE_HOME/ctxkit/hypothesis``, else
    ``~/.cache/ctxkit/hypothesis`` (the temporary directory when there is no home)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # the XDG spec: a relative value is ignored
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:
            base = tempfile.gettempdir()
    return Path(base) / "ctxkit" / "hypothesis"


@contextmanager
def hypothesis_files_in_cache() -> Iterator[None]:
    """Keep Hypothesis's files out of the user's current directory for the run.

    The suite keeps no examples (``database=None``), but Hypothesis still caches what it
    reads (the constants in the code under test, a Unicode table) under its home directory,
    ``.hypothesis`` in the current directory by default: every ``ctxkit conformance`` would
    leave one wherever it was started. For the run, the home is :func:`hypothesis_cache_dir`;
    it is set back afterwards, so a pytest session's own database stays where it was. A
    home chosen with ``HYPOTHESIS_STORAGE_DIRECTORY`` is left alone.
    """
    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        yield
        return
    previous = storage_directory(intent_to_write=False).home_directory
    set_hypothesis_home_dir(hypothesis_cache_dir())
    try:
        yield
    finally:
        set_hypothesis_home_dir(previous)


def _run(
    options: RunOptions,
    *,
    progress: Callable[[str], None] | None,
    tick: Callable[[int, int], None] | None,
) -> Report:
    if options.profile not in PROFILES:
        raise SetupError(f"unknown profile {options.profile!r}; choose {', '.join(PROFILES)}")
    if options.schedule not in SCHEDULES:
        raise SetupError(f"unknown schedule {options.schedule!r}; choose {', '.join(SCHEDULES)}")
    if options.jobs < 1:
        raise SetupError(f"jobs must be at least 1, not {options.jobs}")
    try:
        relax = parse_allow(options.allow)
    except RelaxationError as exc:
        raise SetupError(str(exc)) from exc
    say = progress or (lambda _line: None)
    started = time.monotonic()
    deadline = started + options.deadline
    results = {p.id: PropertyResult(p.id, p.level) for p in PROPERTIES}
    from ctxkit.tokens import TokenCounter

    fallback = options.fallback_budget
    if fallback is None and isinstance(options.config.get("max_tokens"), int):
        fallback = options.config["max_tokens"]
    worker = _Worker(options, deadline)
    phases = Phases()
    try:
        with phases.timing("start"):
            spec, observes_events, probe = worker.start()
        if probe is not None:
            return _not_built(spec, options, results, probe, started)
        shapes = _shapes(options, worker.speaks)
        say(f"judged in {', '.join(shapes.shapes)}: {shapes.why}")
        session = Session(
            child=worker.child,
            count_message=_cached(TokenCounter().count_message),
            relax=relax,
            ignore=ANNOTATION_KEYS,
            observes_events=observes_events,
            shapes=shapes.shapes,
            fallback_budget=fallback,
            timeout=options.timeout,
            started=started,
        )
        if tick is not None:
            session.on_step = lambda: tick(session.examples, session.steps)

        def on_failure(property_id: str) -> None:
            say(f"{property_id} failed, {session.first_failure[property_id]:.1f} s in")
            if len(session.first_failure) == 1:
                search.prepare_verifying(property_id)

        session.on_failure = on_failure
        session.on_slow = lambda op, took: say(
            f"{during(op)} took {took:.1f} s, past the {options.timeout:g} s timeout: the "
            f"machine is busy, not the target hung; each call now gets {session.timeout:g} s"
        )
        if worker.slow_build is not None:
            session.slowed("reset", *worker.slow_build)
        checking = {p.id for p in PROPERTIES if p.level != "advisory"}
        for property_id, why in NOT_APPLICABLE.get(worker.form, {}).items():
            checking.discard(property_id)
            results[property_id].message = f"n/a: {why}"
        if not observes_events:
            checking.discard("events")
            results["events"].message = (
                "not observed: the target emits no events ctxkit can see (mount() targets "
                "and factories taking hooks= are observed)"
            )
        if options.only is not None:
            checking &= options.only
        cache_loop = _CacheLoop(
            options, deadline, shapes.shapes, session.count_message, say, results, phases
        )
        search = _Search(session, options, results, worker, say, deadline, phases)
        if worker.route.shared and search.schedule.beside:
            say(f"one worker at a time: the target is {worker.route.shared}")
        if search.overlap:
            cache_loop.start()
        try:
            ended = search.run(checking)
            coverage = Coverage.of(session, options.max_tokens)
            searched = {  # the searches' figures: minimizing replays as time allows
                "examples": session.examples,
                "steps": session.steps,
                "largest_history": session.largest_history,
                "compaction_events": session.compaction_events,
            }
        except BaseException:
            search.stop_verifying()  # a hang's reproducer may be queued: nothing will read it
            raise
        finally:
            search.shards.close()
        if (
            observes_events
            and results["events"].status == "passed"
            and not (session.compaction_events)
        ):
            results["events"].status = "skipped"
            results["events"].message = (
                "no events observed: the target emitted no context:pre_compact or "
                "context:post_compact in the whole run"
            )
        try:
            search.finish()
        finally:
            search.verifier.close()
        if search.overlap:
            cache_loop.join(worker.child)
        else:
            cache_loop.measure(worker.child)
    finally:
        worker.close()
    report = _report(spec, options, results, started)
    report.coverage = coverage
    if report.verdict == "pass" and not coverage.compacted_views:
        report.verdict = "inconclusive"
    report.depth = {
        "examples": searched["examples"],
        "steps": searched["steps"],
        "largest_history": searched["largest_history"],
        **coverage.as_depth(),
        "searches": search.rounds,
        "examples_per_search": list(search.examples),
        "schedule": options.schedule,
        "jobs": search.shards.jobs,
        "compaction_events": searched["compaction_events"],
        "ended": ended,
        "slow_calls": session.slow_calls,
        "timeout_s": session.timeout,
        "deadline_s": options.deadline,
        "not_sent": dict(session.unsupported),
        "shapes": list(shapes.shapes),
        **({"normalized": session.normalized} if session.normalized else {}),
    }
    report.shapes = shapes
    report.phases = phases.as_dict()
    report.checks = {
        property_id: _check_of(failure) for property_id, failure in search.failures.items()
    }
    return report


def _shapes(options: RunOptions, speaks: Any) -> Spoken:
    """The shapes the run judges (:func:`ctxkit.shapes.spoken.decide`): ``--shapes``, the
    ``--config`` declaration, or what the worker said the target speaks."""
    _, configured = target_config(options.config)
    spoken = None
    if isinstance(speaks, dict):
        try:
            judged = parse_shapes(speaks.get("judged"), "the shapes the target speaks")
        except ShapeError as exc:
            raise SetupError(f"{options.target}: {exc}") from None
        source = speaks.get("source")
        spoken = Spoken(
            judged,
            source if source in HELLO_SOURCES else "declared",
            str(speaks.get("why") or "the target says it speaks them"),
        )
    asked = tuple(options.shapes) if options.shapes is not None else None
    return decide(asked, configured=configured, spoken=spoken)  # type: ignore[arg-type]


def target_config(config: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...] | None]:
    """The target's keywords, without the suite's shape declaration; and that declaration."""
    try:
        return split_config(config)
    except ShapeError as exc:
        raise SetupError(str(exc)) from None


class _Worker:
    """The worker process, loaded with the target; restarted after the target broke it."""

    def __init__(self, options: RunOptions, deadline: float) -> None:
        self.options = options
        self.deadline = deadline
        self.child: Child | None = None
        try:
            self.route = route_for(options.target, options.implementation)
        except RouteError as exc:
            raise SetupError(str(exc)) from None
        self.spec = options.target or options.implementation or DEFAULT_TARGET
        self.build: Any = None
        """How a reproducer imports and builds the target (``hello``'s ``build``), if known."""
        self.speaks: Any = None
        """The shapes the target speaks and why (``hello``'s ``speaks``), if it says."""
        self.form: Any = None
        """The form the target takes (``hello``'s ``form``), if it says."""
        self.slow_build: tuple[float, float] | None = None
        """The first build answered in the grace a run's first slow call gets (as
        :meth:`Session.call` gives it): the seconds it took and the timeout every later call
        gets."""

    def _allowance(self) -> float:
        """Loading imports the target and its libraries: ``--load-timeout``, else the rest of
        the deadline; never past the deadline."""
        left = self.deadline - time.monotonic()
        limit = self.options.load_timeout
        if limit is None:
            limit = left if math.isfinite(left) else LOAD_TIMEOUT
        return max(1.0, min(limit, left))

    def _load(self) -> Any:
        try:
            self.child = Child(
                self.route.command,
                timeout=self.options.timeout,
                memory_limit=self.options.memory_limit,
                transcript=self.options.transcript,
            )
        except OSError as exc:
            raise SetupError(f"{self.spec}: {self.route.cannot_start(exc)}") from None
        allowance = self._allowance()
        try:
            loaded = self.child.hello(
                self.route.target,
                target_config(self.options.config)[0],
                ANNOTATION_KEYS,
                timeout=allowance,
                form=self.options.form,
            )
        except TargetUnusable as exc:
            if exc.kind == "timeout":
                given = self.options.load_timeout is not None
                exc.message = (
                    f"loading the target did not return within {allowance:g} s "
                    + ("(--load-timeout)" if given else "(the rest of the --deadline)")
                    + "; give it more with --load-timeout SECONDS"
                )
            raise
        if not loaded.ok:
            raise SetupError(loaded.message or loaded.error)
        if isinstance(loaded.value, dict):
            self.build = loaded.value.get("build")
            self.speaks = loaded.value.get("speaks")
            self.form = loaded.value.get("form")
        return loaded.value

    def start(self) -> tuple[str, bool, tuple[Status, str] | None]:
        """Load the target and build it once: (spec, observes events, why it cannot be
        checked: ``failed`` if it does not follow the contract, ``error`` if building it
        hung or crashed)."""
        try:
            loaded = self._load()
        except TargetUnusable as exc:
            raise SetupError(f"{self.spec}: {exc.message}{self.route.hint}") from None
        self.spec = str(loaded.get("target") or self.spec)
        assert self.child is not None
        limit = min(self.options.timeout, self._allowance())
        grace = first_grace(limit, self.deadline - time.monotonic())
        began = time.monotonic()
        try:
            probe = self.child.call("reset", timeout=limit, grace=grace)
        except TargetUnusable as exc:
            return self.spec, loaded["events"], ("error", exc.message)
        took = time.monotonic() - began
        if took > limit:
            self.slow_build = (took, limit + grace)
        if not probe.ok and probe.kind == "contract":
            return self.spec, loaded["events"], ("failed", probe.message)
        if not probe.ok:
            raise SetupError(
                f"{self.spec}: building the manager raised {probe.error}" + config_hint(probe.error)
            )
        return self.spec, loaded["events"], None

    def restart(self) -> Child:
        self.close()
        self._load()
        assert self.child is not None
        return self.child

    def close(self) -> None:
        if self.child is not None:
            self.child.close()
            self.child = None


class _CacheLoop:
    """The prompt-cache loop (``cache_stability``): after the searches on their worker, or
    beside them on a worker of its own (the ``overlap`` schedule), so the second core runs it
    while the first searches. If that worker cannot start, the loop runs after the searches
    as before: nothing is lost."""

    def __init__(
        self,
        options: RunOptions,
        deadline: float,
        shapes: tuple[str, ...],
        count_message: Callable[[dict[str, Any]], int],
        say: Callable[[str], None],
        results: dict[str, PropertyResult],
        phases: Phases,
    ) -> None:
        self.options = options
        self.deadline = deadline
        self.shapes = shapes
        self.count_message = count_message
        self.say = say
        self.result = results["cache_stability"]
        self.phases = phases
        self.thread: threading.Thread | None = None
        self.worker: _Worker | None = None
        self.measured = False
        self.cutoff = deadline
        """When the loop takes no more steps: the run's deadline, brought forward to
        :data:`CACHE_LOOP_AFTER` past the end of the searches (:meth:`join`), so a slow target's
        loop ends with the run's real work, not minutes after it."""
        self.error: BaseException | None = None
        """ctxkit's own error in the thread, raised again by :meth:`join`."""

    def measure(self, child: Child | None, *, beside: bool = False) -> None:
        """Run the loop on ``child`` and judge the property."""
        if not self.options.stability_steps:
            self.result.message = "not measured (stability_steps=0)"
        elif child is not None and child.alive:
            with self.phases.timing("cache_loop", beside=beside):
                measure_stability(
                    child,
                    self.result,
                    steps=self.options.stability_steps,
                    shapes=self.shapes,
                    deadline=lambda: self.cutoff,
                    count_message=self.count_message,
                    say=self.say,
                )
        else:
            self.result.message = "not measured: the target had stopped"
        self.measured = True

    def start(self) -> None:
        """Start the loop beside the searches, on a worker of its own."""
        if not self.options.stability_steps:
            self.measure(None)
            return
        self.worker = _Worker(self.options, self.deadline)
        self.thread = threading.Thread(target=self._beside, name="ctxkit-cache-loop", daemon=True)
        self.thread.start()

    def _beside(self) -> None:
        assert self.worker is not None
        try:
            _spec, _events, probe = self.worker.start()
            if probe is None:
                self.measure(self.worker.child, beside=True)
        except (SetupError, TargetUnusable):
            pass  # measured after the searches instead
        except BaseException as exc:
            self.error = exc
        finally:
            self.worker.close()

    def join(self, child: Child | None) -> None:
        """Wait for the loop beside (it stops taking steps at the deadline, and each call has
        its timeout); run it on ``child`` if its own worker could not start."""
        self.cutoff = min(self.cutoff, time.monotonic() + CACHE_LOOP_AFTER)
        if self.thread is not None:
            left = self.cutoff - time.monotonic()
            self.thread.join(max(0.0, left) + self.options.timeout + CLOSE_GRACE_S + 1)
            if self.thread.is_alive():  # a call that outlived its timeout: not judged
                self.result.message = "not measured: the loop did not end by the deadline"
                return
        if self.error is not None:
            raise self.error
        if not self.measured:
            self.measure(child)


def _cached(count: Callable[[dict[str, Any]], int]) -> Callable[[dict[str, Any]], int]:
    """Counts of messages seen before: views repeat the history's messages many times. Keyed
    by :func:`~ctxkit.exact.exact_form`; a message without one is counted every time."""
    memo: dict[bytes, int] = {}

    def cached(message: dict[str, Any]) -> int:
        key = exact_form(message)
        if key is None:
            return count(message)
        found = memo.get(key)
        if found is None:
            if len(memo) > 50_000:
                memo.clear()
            found = memo[key] = count(message)
        return found

    return cached


class _Search:
    """The searches of one run, and what becomes of their findings."""

    def __init__(
        self,
        session: Session,
        options: RunOptions,
        results: dict[str, PropertyResult],
        worker: _Worker,
        say: Callable[[str], None],
        deadline: float,
        phases: Phases,
    ) -> None:
        self.session = session
        self.phases = phases
        self.options = options
        self.results = results
        self.worker = worker
        self.say = say
        self.deadline = deadline
        self.failures: dict[str, PropertyFailure] = {}
        self.taken: dict[str, dict[str, Any]] = {}
        """Results taken from shares searched elsewhere: how each is verified here."""
        self.stops: list[TargetStopped] = []
        self.rounds = 0
        self.examples: list[int] = []
        """The examples each search was given."""
        self.schedule = SCHEDULES[options.schedule]
        self.overlap = (
            self.schedule.beside and not worker.route.shared and options.transcript is None
        )
        """Other workers run beside this one: not when every worker would reach the same
        instance of the target, nor when one protocol log (--protocol-log) is to show every
        call."""
        self.shards = Shards(options.jobs if self.overlap else 1)
        self.verifying = (
            ThreadPoolExecutor(VERIFIERS, "ctxkit-verify")
            if options.verify and self.overlap
            else None
        )
        """Where reproducers are verified beside the run (else one by one at its end)."""
        build = Build.from_data(worker.build) if options.verify else None
        self.verifier = Verifier(
            memory_limit=options.memory_limit,
            pythonpath=build.pythonpath if build is not None else None,
        )
        """Runs each reproducer in a fresh process: one forked from a process that has
        imported what the scripts import, where that gives the run's verdict."""
        self.verified: list[Future[None]] = []
        profile = dict(PROFILES[options.profile])
        if options.max_examples is not None:
            profile["max_examples"] = options.max_examples
        self.profile = profile
        self.settings = settings(
            **profile,
            deadline=None,
            database=None,
            print_blob=False,
            report_multiple_bugs=True,
            suppress_health_check=list(HealthCheck),
            # The explain phase would rerun each failure many times to annotate it; the
            # reproducer script does that job.
            phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
        )

    def _searching_until(self) -> float:
        """Searches leave the last fifth of the run (at most a minute) for making failures
        smaller and checking their reproducers."""
        reserve = min(60.0, self.options.deadline / 5)
        return self.deadline - reserve

    def run(self, checking: set[str]) -> str:
        """Search until nothing is left to check; how the searches ended."""
        session, remaining = self.session, set(checking)
        outcome = ""
        while remaining:
            if self.rounds == self.options.max_rounds:
                if outcome == "stopped":
                    self._not_checked(remaining)
                    return "target stopped"
                self._passed(remaining, f"no failure found in {self.rounds} searches")
                return "searches"
            if time.monotonic() >= self._searching_until():
                self._passed(remaining, self._depth_note())
                return "deadline"
            self.rounds += 1
            session.checking = frozenset(remaining)
            session.deadline = self._searching_until()
            examples = self.profile["max_examples"]
            self.examples.append(examples)
            shares = split(examples, self.options.seed + self.rounds - 1, self.shards.jobs)
            self.say(
                f"search {self.rounds}: checking {len(remaining)} properties, up to "
                f"{examples} runs of {self.profile['stateful_step_count']} steps"
                + (
                    f" ({shares[0].examples} here, {examples - shares[0].examples} in "
                    f"{len(shares) - 1} more process(es))"
                    if len(shares) > 1
                    else ""
                )
            )
            with self.phases.timing("search"):
                elsewhere = [self._elsewhere(share, remaining) for share in shares[1:]]
                outcome = self._search_once(shares[0])
                found = self._take(remaining)
                for wait in elsewhere:
                    found |= self._take_share(wait(), remaining - found)
            remaining -= found
            if outcome == "complete":
                remaining -= self.steer(remaining)
                self._passed(remaining, "")
                return "complete"
            if outcome == "deadline":
                self._passed(remaining, self._depth_note())
                return "deadline"
            if outcome == "stopped":
                if self.stops[-1].unusable.kind == "ended":
                    self.stops.pop()  # a replay found no worker, ended earlier: not the target's
                else:
                    remaining -= self._charge(self.stops[-1], remaining)
                    if len(self.stops) >= MAX_STOPS:
                        self._not_checked(remaining)
                        return "target stopped"
                try:
                    session.child = self.worker.restart()
                except (SetupError, TargetUnusable) as exc:
                    self._not_checked(remaining, f"the worker could not be restarted: {exc}")
                    return "target stopped"
        return "complete"

    def steer(self, remaining: set[str]) -> set[str]:
        """When few views of the searches were compacted (under one in
        :data:`RARELY_COMPACTED`), grow one history toward ``--max-tokens`` (doubling, a view
        at the manager's own budget after each tool round) until the target compacts on its
        own, judging every step; if it does, search once more with every example starting
        near that size (:class:`SteeredMachine`). The properties found failing. A target that
        never compacted is then ``inconclusive``."""
        session = self.session
        seen = session.compacted_views
        if seen * RARELY_COMPACTED >= session.views or not remaining:
            return set()
        if self.options.only is not None:
            return set()  # a share of a search run elsewhere: the run that took it steers
        if time.monotonic() >= self._searching_until():
            return set()
        limit = self.options.max_tokens
        self.say(
            f"{seen:,} of {session.views:,} views compacted: growing a history toward "
            f"{limit:,} tokens, to find where the manager compacts on its own"
        )
        session.checking = frozenset(remaining)
        session.deadline = self._searching_until()
        goes_on, session.goes_on = session.goes_on, True
        with self.phases.timing("search"):
            try:
                machine = ConformanceMachine(session)
                machine.choose_shape(shape=session.shapes[0])
                while not machine.ended and (held := sum(machine.costs)) < limit:
                    machine.grow_turn(growth_turn_tokens(held, limit))
                    if session.compacted_views > seen:
                        session.grown_to = sum(machine.costs)
                        self._narrow(held)
                        break
            except TargetStopped as stop:
                self.stops.append(stop)
                return self._charge(stop, remaining) | self._take(remaining)
            except (DeadlineReached, UnsatisfiedAssumption):
                pass
            finally:
                session.goes_on = goes_on
            found = self._take(remaining)
            if not session.grown_to or not remaining - found:
                return found
            self.say(f"the target compacted at {session.grown_to:,} tokens: searching from there")
            examples = max(10, self.profile["max_examples"] // STEERED_SHARE)
            self.rounds += 1
            self.examples.append(examples)
            session.checking = frozenset(remaining - found)
            seed = self.options.seed + self.rounds - 1
            outcome = self._search_once(Share(seed, examples), SteeredMachine)
            if outcome == "stopped":
                stop = self.stops[-1]
                found |= self._charge(stop, remaining - found)
            return found | self._take(remaining - found)

    def _narrow(self, low: int) -> None:
        """Bring :attr:`Session.grown_to` down toward the smallest history the target
        compacts, from above ``low`` tokens (its last view before the doubling turn that
        compacted was whole): :data:`GROWN_BISECTIONS` halvings, each a fresh manager given a
        history of the middle size and asked for one view at its own budget, as a steered
        example starts. Doubling overshoots by up to twice; the steered search's histories,
        and the failures it finds, are then no larger than they need to be."""
        session = self.session
        for _ in range(GROWN_BISECTIONS):
            high = session.grown_to
            middle = (low + high) // 2
            seen = session.compacted_views
            probe = ConformanceMachine(session)
            probe.start_grown(shape=session.shapes[0], share=middle / high)
            probe.request_view(budget=OWN_BUDGET)
            if probe.ended:
                return
            if session.compacted_views > seen:
                # at least the size asked for: a failure that left the history unlike the
                # model starts the probe again on a fresh manager, whose history is short
                session.grown_to = max(middle, sum(probe.costs))
            else:
                low = middle

    def _search_once(
        self, share: Share, machine: type[ConformanceMachine] = ConformanceMachine
    ) -> str:
        """One Hypothesis search, of a share's examples with its seed: complete, found,
        stopped, deadline or unreliable."""
        session = self.session
        factory = hypothesis_seed(share.seed)(lambda: machine(session))
        session.goes_on = self.schedule.goes_on
        try:
            with _shrinking_limit(self.options.shrink_seconds, self.say), _own_constants():
                run_state_machine_as_test(
                    factory, settings=settings(self.settings, max_examples=share.examples)
                )
        except PropertyFailure as failure:
            self.failures.setdefault(failure.property_id, failure)
            return "found"
        except TargetStopped as stop:
            self.stops.append(stop)
            return "stopped"
        except DeadlineReached:
            return "deadline"
        except BaseExceptionGroup as group:
            failures, others = group.split(PropertyFailure)
            flaky = isinstance(group, FlakyFailure)
            for failure in _leaves(failures):
                if flaky:
                    failure.note = NOT_REPEATED
                self.failures.setdefault(failure.property_id, failure)
            stops = [e for e in _leaves(others) if isinstance(e, TargetStopped)]
            if stops:
                self.stops.append(stops[0])
                return "stopped"
            if others is not None and not flaky:
                raise others from None
            return "found"
        except HypothesisException as exc:
            self.say(f"the target answered the same calls differently ({type(exc).__name__})")
            return "unreliable"
        finally:
            session.goes_on = False  # minimizing and verifying replay until a failure
        return "complete"

    def _elsewhere(self, share: Share, remaining: set[str]) -> Callable[[], Report]:
        """Start a share of this search in another process: a run of one search, of the
        properties still open, that makes what it finds small and verifies it there. Returns
        how to wait for its report; if no process could be started, waiting searches the
        share here."""
        options = dataclasses.replace(
            self.options,
            seed=share.seed,
            max_examples=share.examples,
            max_rounds=1,
            only=frozenset(remaining),
            stability_steps=0,
            verify=False,  # here, with the rest, if this process takes what it found
            jobs=1,
            transcript=None,
            found_by=self.options.found_by or self.options.command,
            load_timeout=None,
        )
        left = self._searching_until() - time.monotonic()
        run_started = time.time() - (time.monotonic() - self.session.started)
        future = self.shards.submit(options, left, run_started)

        def wait() -> Report:
            try:
                return future.result()
            except OSError as exc:  # no second process on this machine: the share runs here
                self.say(f"no second search process ({exc}); its share is searched here")
                left = self.deadline - time.monotonic()
                return search_elsewhere(run, options, left, run_started)

        return wait

    def _take_share(self, report: Report, open_here: set[str]) -> set[str]:
        """What a share searched elsewhere found, for the properties this process did not
        fail: its results as they are (made small and verified there); its examples, steps
        and events counted in the run's depth."""
        depth, session = report.depth, self.session
        session.examples += int(depth.get("examples") or 0)
        session.steps += int(depth.get("steps") or 0)
        session.compaction_events += int(depth.get("compaction_events") or 0)
        session.largest_history = max(session.largest_history, depth.get("largest_history", 0))
        session.largest_history_tokens = max(
            session.largest_history_tokens, depth.get("largest_history_tokens", 0)
        )
        session.views += int(depth.get("views") or 0)
        session.compacted_views += int(depth.get("compacted_views") or 0)
        for reason, count in (depth.get("not_sent") or {}).items():
            session.unsupported[reason] = session.unsupported.get(reason, 0) + count
        session.normalized = session.normalized or depth.get("normalized", "")
        found = set()
        for theirs in report.properties:
            if theirs.id in open_here and theirs.status in ("failed", "error"):
                ours = self.results[theirs.id]
                for name in (
                    "status", "message", "counterexample", "reproducer", "verified",
                    "verification", "time_to_failure_s",
                ):  # fmt: skip
                    setattr(ours, name, getattr(theirs, name))
                found.add(theirs.id)
                if theirs.id in report.checks:
                    self.taken[theirs.id] = report.checks[theirs.id]
        return found

    def _take(self, remaining: set[str]) -> set[str]:
        """Failures of this search (reported, or seen before it stopped) as results."""
        for property_id, failure in self.session.smallest.items():
            if property_id in remaining and property_id not in self.failures:
                if not self.schedule.goes_on:
                    failure.note = failure.note or (
                        "the search stopped before shrinking finished: the smallest failure seen"
                    )
                self.failures[property_id] = failure
        found = {p for p in self.failures if p in remaining}
        for property_id in found:
            failure = self.failures[property_id]
            result = self.results[property_id]
            result.status = "failed"
            result.message = failure.message
            result.time_to_failure_s = self.session.first_failure.get(property_id)
        return found

    def _charge(self, stop: TargetStopped, remaining: set[str]) -> set[str]:
        """A hang or crash costs the property its call was made for, if still unjudged (else
        ``lifecycle``, if it is): a finding with its calls, reproduced like a failure."""
        charge = stop.charge if stop.charge in remaining else "lifecycle"
        property_id = charge if charge in remaining else None
        kind = stop.unusable.kind
        what = f"{stop.unusable.message} (a history of {stop.history} messages)"
        self.say(f"the target stopped: {what}")
        if property_id is None:
            return set()
        result = self.results[property_id]
        result.status = "error"
        result.message = what
        check = (
            Check("returns")
            if kind == "timeout"
            else Check("crashes", {"status": stop.unusable.status})
        )
        self.failures[property_id] = PropertyFailure(
            property_id,
            what,
            calls=stop.calls,
            check=check,
            history=stop.history,
            rules=[],
        )
        if kind == "timeout":  # nothing to make smaller: its verifying waits beside the search
            self._conclude(result, self.failures[property_id])
        return {property_id}

    def _passed(self, properties: set[str], note: str) -> None:
        for property_id in properties:
            result = self.results[property_id]
            if result.status == "skipped":
                result.status = "passed"
                result.message = note

    def _not_checked(self, properties: set[str], why: str = "") -> None:
        reason = why or (
            f"not checked: the target stopped {len(self.stops)} times "
            f"(last: {self.stops[-1].unusable.message})"
        )
        for property_id in properties:
            result = self.results[property_id]
            if result.status == "skipped":
                result.status = "error"
                result.message = reason

    def _depth_note(self) -> str:
        s = self.session
        return (
            f"no failure before the {self.options.deadline:g} s deadline, in {s.examples} "
            f"examples ({s.steps} steps; histories up to {s.largest_history} messages)"
        )

    def finish(self) -> None:
        """Make each failure smaller (its steps, then its calls and budgets), render its
        reproducer and check that it fails."""
        session = self.session
        verify_by = self.deadline - min(10.0, self.options.deadline / 20)
        shrinking_by = min(verify_by, time.monotonic() + self.options.minimize_seconds)
        waiting = list(self.failures.items())
        for number, (property_id, failure) in enumerate(waiting):
            result = self.results[property_id]
            if result.reproducer is not None:
                continue  # a hang's, concluded when it was charged (_charge)
            # each failure an equal share of the time left: halves for its steps and calls
            share = max(0.0, shrinking_by - time.monotonic()) / (len(waiting) - number)
            session.deadline = time.monotonic() + share / 2
            session.work_left = MINIMIZE_WORK
            cut = False
            if failure.rules and result.status == "failed":
                self.say(f"minimizing the {property_id} counterexample")
                with (
                    self.phases.timing("minimize"),
                    suppress(DeadlineReached, TargetUnusable, SetupError),
                ):
                    if not session.child.alive:
                        self._restart()
                    failure = minimize(session, failure, self._restart)
                cut = time.monotonic() >= session.deadline
            if result.status == "failed" or failure.check.args.get("status") is not None:
                session.deadline = time.monotonic() + share / 2
                session.work_left = MINIMIZE_WORK
                failure = self._shrink_calls(failure)
                cut = cut or time.monotonic() >= session.deadline
                self.failures[property_id] = failure
            session.work_left = None
            if cut and result.status == "failed":
                failure.note = "; ".join(filter(None, [failure.note, CUT_SHORT]))
            if result.status == "failed":
                result.message = failure.message
            self._conclude(result, failure)
        session.deadline = verify_by
        if self.verifying is not None:
            for property_id in self.taken:  # found by a share elsewhere, verified here
                result = self.results[property_id]
                self.verified.append(self.verifying.submit(self._verify, result, beside=True))
            self.verifying.shutdown()
            for future in self.verified:
                future.result()  # ctxkit's own error, if one happened there
        elif self.options.verify:
            for result in self.results.values():
                if result.reproducer is not None:
                    self._verify(result)

    def stop_verifying(self) -> None:
        """Cancel the verifications not yet begun, for a run that cannot finish."""
        if self.verifying is not None:
            self.verifying.shutdown(wait=False, cancel_futures=True)
        self.verifier.close()

    def _conclude(self, result: PropertyResult, failure: PropertyFailure) -> None:
        """The failure as its result shows it: its counterexample and reproducer, verified
        in a fresh process beside what the run does next (where verifying runs beside)."""
        if failure.note:
            result.message += f" ({failure.note})"
        repro = self._reproduction(result.id, result.level, failure)
        result.counterexample = {
            "messages": failure.history,
            "calls": len(failure.calls),
            "steps": render_steps(repro),
            "trace": [call.as_data() for call in failure.calls],
        }
        result.reproducer = render_script(repro)
        if self.verifying is not None:
            self.verified.append(self.verifying.submit(self._verify, result, beside=True))

    def _reproduction(
        self, property_id: str, level: str, failure: PropertyFailure | None
    ) -> Reproduction:
        """The failure's reproducer, as data; None: one with no calls, that only imports and
        builds the target (:meth:`prepare_verifying`)."""
        route = self.worker.route
        return Reproduction(
            target=self.worker.spec if route.kind == "python" else route.target,
            config=target_config(self.options.config)[0],
            property_id=property_id,
            level=level,
            message=failure.message if failure else "",
            calls=failure.calls if failure else [],
            check=failure.check if failure else Check("raises"),
            command=self.options.found_by or self.options.command,
            implementation=self.options.implementation,
            remote=route.kind != "python",
            form=self.options.form,
            build=Build.from_data(self.worker.build) if route.kind == "python" else None,
        )

    def prepare_verifying(self, property_id: str) -> None:
        """At a run's first failure: have what its reproducers will import imported, beside
        the search, so the verifying that follows it does not wait for a slow import."""
        if self.options.verify and property_id in self.results:
            script = render_script(self._reproduction(property_id, "required", None))
            self.verifier.prepare(script)

    def _shrink_calls(self, failure: PropertyFailure) -> PropertyFailure:
        """The failure with as few calls and as large budgets as still fail it
        (:class:`~ctxkit.conformance.search.minimize.CallShrinker`); as far as it got when time or
        the worker runs out."""
        shrinker = CallShrinker(self.session, failure, self._restart)
        self.say(f"shrinking the {failure.property_id} calls")
        with self.phases.timing("shrink"), suppress(DeadlineReached, TargetUnusable, SetupError):
            if not self.session.child.alive:
                self._restart()
            shrinker.run()
        return shrinker.best

    def _restart(self) -> None:
        self.session.child = self.worker.restart()

    def _verify(self, result: PropertyResult, *, beside: bool = False) -> None:
        """Run the result's reproducer in a fresh process: does it fail as the run saw?"""
        left = self.deadline - time.monotonic()
        if left < 2:
            result.verification = "not verified: no time left before the deadline"
            return
        self.say(f"verifying the {result.id} reproducer in a fresh process")
        failure = self.failures.get(result.id)
        check = _check_of(failure) if failure is not None else self.taken[result.id]
        with self.phases.timing("verify", beside=beside):
            result.verified, result.verification = self.verifier.verify(
                result.reproducer or "",
                property_id=result.id,
                check=check["kind"],
                timeout=min(left, self.options.timeout * (check["calls"] + 3) + 30),
                name=file_name(result.id, self.worker.spec),
                status=check["status"],
            )


def _check_of(failure: PropertyFailure) -> dict[str, Any]:
    """How a failure's reproducer is judged: the check's kind, the status a crash ends with,
    and how many calls it makes (its timeout)."""
    return {
        "kind": failure.check.kind,
        "status": failure.check.args.get("status"),
        "calls": len(failure.calls),
    }


@contextmanager
def _shrinking_limit(seconds: float, say: Callable[[str], None]) -> Iterator[None]:
    """Cap Hypothesis's shrinking time (its own default is 300 s), where the engine has one,
    and say so in our words when the cap is hit instead of Hypothesis's five-minute warning."""
    from hypothesis.internal.conjecture import engine
    from hypothesis.reporting import with_reporter

    def reporter(text: object) -> None:
        if str(text).startswith("WARNING: Hypothesis has spent more than five minutes"):
            say(f"shrinking stopped after {seconds:g} s: the counterexample may not be minimal")
        else:
            say(str(text))

    saved = getattr(engine, "MAX_SHRINKING_SECONDS", None)
    if saved is not None:
        engine.MAX_SHRINKING_SECONDS = seconds
    try:
        with with_reporter(reporter):
            yield
    finally:
        if saved is not None:
            engine.MAX_SHRINKING_SECONDS = saved


@contextmanager
def _own_constants() -> Iterator[None]:
    """Hypothesis draws some values from constants in the source of every local module loaded
    so far; which are loaded differs between a command-line run, a test session and a
    benchmark, so one seed would search differently in each. The searches draw from
    Hypothesis's own constants only: the same seed finds the same failures in any process."""
    from hypothesis.internal.conjecture import providers

    local = getattr(providers, "_get_local_constants", None)
    cache = getattr(getattr(providers, "CONSTANTS_CACHE", None), "cache", None)
    if local is None or cache is None:  # a Hypothesis without the harvest
        yield
        return
    none = providers.Constants()
    providers._get_local_constants = lambda: none
    cache.clear()
    try:
        yield
    finally:
        providers._get_local_constants = local
        cache.clear()


def _leaves(group: BaseExceptionGroup | None) -> list[BaseException]:
    if group is None:
        return []
    found: list[BaseException] = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            found.extend(_leaves(exc))
        else:
            found.append(exc)
    return found


def _not_built(
    spec: str,
    options: RunOptions,
    results: dict[str, PropertyResult],
    problem: tuple[Status, str],
    started: float,
    why: str = "",
) -> Report:
    """The report for a target that could not be built: lifecycle says why, and nothing else
    was checked (``why``: what the others say after "not checked: ")."""
    status, message = problem
    results["lifecycle"].status = status
    results["lifecycle"].message = message
    why = why or (
        "the target does not follow the protocol"
        if status == "failed"
        else "no manager could be built"
    )
    for result in results.values():
        if result.id != "lifecycle":
            result.message = f"not checked: {why}"
    return _report(spec, options, results, started)


def stopped(options: RunOptions, reason: str, started: float) -> Report:
    """The report of a run that ended before it could judge anything (the target could not
    be loaded or did not load in time, an interrupt, ctxkit's own error): verdict ``error``,
    ``lifecycle`` giving the reason, nothing else checked. ``started``: ``time.monotonic()``
    when the run began."""
    results = {p.id: PropertyResult(p.id, p.level) for p in PROPERTIES}
    spec = options.target or options.implementation or DEFAULT_TARGET
    return _not_built(spec, options, results, ("error", reason), started, why=reason)


def _report(
    spec: str, options: RunOptions, results: dict[str, PropertyResult], started: float
) -> Report:
    ordered = [results[p.id] for p in PROPERTIES]
    required = [r for r in ordered if r.level == "required"]
    if any(r.status == "error" for r in required):
        verdict: Literal["pass", "fail", "error"] = "error"
    elif any(r.status == "failed" for r in required):
        verdict = "fail"
    else:
        verdict = "pass"
    return Report(
        target=spec,
        verdict=verdict,
        seed=options.seed,
        duration_s=time.monotonic() - started,
        properties=ordered,
        profile=options.profile,
        allow=list(options.allow),
        config=dict(options.config),
    )
