"""Runs the suite against one target and decides a status per property.

One Hypothesis search checks every property at once. Each failure is shrunk on its own (each
property raises its own exception type); the failed properties are then set aside and the
search runs again for the rest, until a search finds nothing new. A passing target costs one
search.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import HypothesisException
from hypothesis.stateful import run_state_machine_as_test

from ctxkit.conformance.child import DEFAULT_MEMORY_LIMIT, Child, TargetUnusable
from ctxkit.conformance.invariants import ANNOTATION_KEYS
from ctxkit.conformance.machine import PropertyFailure, Relaxations, Session, make_machine
from ctxkit.conformance.properties import PROPERTIES, RELAXATIONS
from ctxkit.conformance.target import DEFAULT_TARGET

__all__ = ["PROFILES", "PropertyResult", "Report", "RunOptions", "SetupError", "run"]

PROFILES = {
    "quick": {"max_examples": 25, "stateful_step_count": 30},
    "default": {"max_examples": 80, "stateful_step_count": 50},
    "thorough": {"max_examples": 300, "stateful_step_count": 80},
}

Status = Literal["passed", "failed", "error", "skipped"]


class SetupError(Exception):
    """The target could not be loaded, or the options are wrong: exit code 2."""


@dataclass
class PropertyResult:
    id: str
    level: str
    status: Status = "skipped"
    message: str = ""
    counterexample: dict[str, Any] | None = None
    reproducer: str | None = None
    time_to_failure_s: float | None = None


@dataclass
class Report:
    target: str
    verdict: Literal["pass", "fail", "error"]
    seed: int
    duration_s: float
    properties: list[PropertyResult]
    profile: str = "default"
    allow: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "verdict": self.verdict,
            "seed": self.seed,
            "duration_s": round(self.duration_s, 3),
            "profile": self.profile,
            "allow": self.allow,
            "properties": [
                {
                    "id": p.id,
                    "level": p.level,
                    "status": p.status,
                    "message": p.message,
                    "counterexample": p.counterexample,
                    "reproducer": p.reproducer,
                    "time_to_failure_s": (
                        None if p.time_to_failure_s is None else round(p.time_to_failure_s, 3)
                    ),
                }
                for p in self.properties
            ],
        }


@dataclass
class RunOptions:
    target: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    profile: str = "default"
    max_examples: int | None = None
    timeout: float = 10.0
    shapes: tuple[str, ...] = ("openai", "anthropic")
    allow: list[str] = field(default_factory=list)
    max_rounds: int = 6
    shrink_seconds: float = 20.0
    """Shrinking stops after this long per search; the counterexample found so far stands."""
    memory_limit: int | None = DEFAULT_MEMORY_LIMIT


def parse_allow(allow: list[str]) -> Relaxations:
    """``--allow`` values as :class:`Relaxations`; :class:`SetupError` names the valid ones."""
    hoisted = dropped = False
    tolerance = 0.0
    for item in allow:
        name, _, value = item.partition("=")
        if name == "hoisted-system" and not value:
            hoisted = True
        elif name == "dropped-system" and not value:
            dropped = True
        elif name == "budget-tolerance":
            try:
                tolerance = float(value)
            except ValueError:
                tolerance = -1.0
            if not 0 <= tolerance <= 1:
                raise SetupError(
                    f"--allow budget-tolerance=R needs a ratio from 0 to 1, got {value!r}"
                )
        else:
            raise SetupError(
                f"unknown relaxation {item!r}; --allow accepts: "
                + ", ".join(r.usage for r in RELAXATIONS.values())
            )
    return Relaxations(hoisted, dropped, tolerance)


def run(
    options: RunOptions,
    *,
    progress: Callable[[str], None] | None = None,
    reproducer: Callable[[PropertyResult, PropertyFailure], str] | None = None,
    tick: Callable[[int, int], None] | None = None,
) -> Report:
    """Run the suite. Raises :class:`SetupError` if the target cannot be loaded.

    ``progress`` gets a line at each search; ``tick`` gets (runs, steps) after every step.
    """
    if options.profile not in PROFILES:
        raise SetupError(f"unknown profile {options.profile!r}; choose {', '.join(PROFILES)}")
    relax = parse_allow(options.allow)
    say = progress or (lambda _line: None)
    started = time.monotonic()
    results = {p.id: PropertyResult(p.id, p.level) for p in PROPERTIES}
    from ctxkit.tokens import TokenCounter

    counter = TokenCounter()
    child = Child(timeout=options.timeout, memory_limit=options.memory_limit)
    spec = options.target or DEFAULT_TARGET
    checking = {p.id for p in PROPERTIES}
    try:
        loaded = child.call(
            "load",
            timeout=max(options.timeout, 60),
            target=options.target,
            config=options.config,
            ignore=sorted(ANNOTATION_KEYS),
        )
        if not loaded.ok:
            raise SetupError(loaded.message)
        spec = loaded.value["spec"]
        probe = child.call("build")
        if not probe.ok and probe.kind == "contract":
            return _broken_contract(spec, options, results, probe.message, started)
        if not probe.ok:
            raise SetupError(f"{spec}: building the manager raised {probe.error}")
        if not loaded.value["events"]:
            checking.discard("events")
            results["events"].message = (
                "not observed: the target emits no events ctxkit can see (mount() targets "
                "and factories taking hooks= are observed)"
            )
        session = Session(
            child=child,
            count_message=_cached(counter.count_message),
            checking=checking,
            relax=relax,
            ignore=ANNOTATION_KEYS,
            observes_events=loaded.value["events"],
        )
        if tick is not None:
            session.on_step = lambda: tick(session.examples, session.steps)
        _search(session, options, results, say, reproducer)
    except TargetUnusable as exc:
        for result in results.values():
            if result.status == "skipped" and result.id in checking:
                result.status = "error"
                result.message = exc.message
    finally:
        child.close()
    return _report(spec, options, results, started)


def _cached(count: Callable[[dict[str, Any]], int]) -> Callable[[dict[str, Any]], int]:
    """Counts of messages seen before: views repeat the history's messages many times."""
    memo: dict[str, int] = {}

    def cached(message: dict[str, Any]) -> int:
        key = json.dumps(message, sort_keys=True, ensure_ascii=False)
        found = memo.get(key)
        if found is None:
            if len(memo) > 50_000:
                memo.clear()
            found = memo[key] = count(message)
        return found

    return cached


def _search(
    session: Session,
    options: RunOptions,
    results: dict[str, PropertyResult],
    say: Callable[[str], None],
    reproducer: Callable[[PropertyResult, PropertyFailure], str] | None,
) -> None:
    profile = dict(PROFILES[options.profile])
    if options.max_examples is not None:
        profile["max_examples"] = options.max_examples
    hypothesis_settings = settings(
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
    for round_number in range(1, options.max_rounds + 1):
        if not session.checking:
            return
        say(
            f"search {round_number}: checking {len(session.checking)} properties, "
            f"up to {profile['max_examples']} runs of {profile['stateful_step_count']} steps"
        )
        machine = make_machine(session, options.shapes)
        factory = hypothesis_seed(options.seed + round_number - 1)(machine)
        try:
            with _shrinking_limit(options.shrink_seconds, say):
                run_state_machine_as_test(factory, settings=hypothesis_settings)
        except PropertyFailure as failure:
            _record([failure], session, results, reproducer)
        except BaseExceptionGroup as group:
            failures, others = group.split(PropertyFailure)
            _record(list(_leaves(failures)), session, results, reproducer)
            if others is not None:
                raise others from None
        except HypothesisException as exc:
            for property_id in session.checking:
                results[property_id].status = "error"
                results[property_id].message = f"the search could not run: {exc}"
            session.checking.clear()
            return
        else:
            for property_id in session.checking:
                results[property_id].status = "passed"
            return
    for property_id in session.checking:
        results[property_id].status = "passed"
        results[property_id].message = f"no failure found in {options.max_rounds} searches"


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


def _leaves(group: BaseExceptionGroup | None) -> list[PropertyFailure]:
    if group is None:
        return []
    found: list[PropertyFailure] = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            found.extend(_leaves(exc))
        elif isinstance(exc, PropertyFailure):
            found.append(exc)
    return found


def _record(
    failures: list[PropertyFailure],
    session: Session,
    results: dict[str, PropertyResult],
    reproducer: Callable[[PropertyResult, PropertyFailure], str] | None,
) -> None:
    for failure in failures:
        result = results[failure.property_id]
        if result.status == "failed":
            continue
        result.status = "failed"
        result.message = failure.message
        result.time_to_failure_s = session.first_failure.get(failure.property_id)
        result.counterexample = {"messages": failure.history, "steps": failure.steps}
        if reproducer is not None:
            result.reproducer = reproducer(result, failure)
        session.checking.discard(failure.property_id)


def _broken_contract(
    spec: str,
    options: RunOptions,
    results: dict[str, PropertyResult],
    message: str,
    started: float,
) -> Report:
    results["lifecycle"].status = "failed"
    results["lifecycle"].message = message
    for result in results.values():
        if result.id != "lifecycle":
            result.message = "not checked: the target does not follow the protocol"
    return _report(spec, options, results, started)


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
