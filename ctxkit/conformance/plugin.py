"""pytest plugin: run the conformance suite inside your own test run, with the same verdicts,
reproducers and errors as ``ctxkit conformance``.

Subclass :class:`ConformanceSuite` in a test module::

    from ctxkit.conformance.plugin import ConformanceSuite

    class TestMyManager(ConformanceSuite):
        target = "mypkg.context:MyManager"
        config = {"max_tokens": 8000}

or point pytest at the packaged suite: ``pytest --pyargs ctxkit.conformance.suite
--ctxkit-target mypkg.context:MyManager``. One test per property; recommended properties that
fail are reported as xfail unless ``--ctxkit-strict``, advisory ones (cache_stability) always.
The suite runs once per target and session. A failure shows what the command shows: the
sentence, what must hold, the seed, the steps and the verified reproducer script.

Options (command line over environment over ini): ``--ctxkit-target`` / ``CTXKIT_TARGET`` /
``ctxkit_target``, and likewise ``config`` (JSON), ``form`` (``contract``, ``function`` or
``session``; detected by default), ``format`` (the shapes to judge the target in, as
``ctxkit conformance --shapes`` takes them; by default the shapes it speaks, decided as the
command decides them: :mod:`ctxkit.shapes.spoken`), ``profile``, ``seed``, ``allow`` (repeat
it or separate with commas), ``timeout``, ``deadline`` and ``strict`` (a flag; ``1``/``true``
in the environment or ini).
"""

from __future__ import annotations

import json
import os
import textwrap
from typing import Any, ClassVar

import pytest

from ctxkit.conformance.judge.catalogue import PROPERTIES, by_id
from ctxkit.conformance.schedule import DEFAULT as DEFAULT_SCHEDULE

__all__ = ["ConformanceSuite"]

DEFAULT_SEED = 1
"""The seed of a run that names none: the command's (``ctxkit.cli.options.DEFAULT_SEED``)."""

OPTIONS = {
    "target": "the context manager to check (module:attr, module, ep:NAME, file.py)",
    "config": "JSON object: the target's keyword arguments or mount() config",
    "form": "the form the target takes: contract, function or session (default: detected)",
    "shapes": "the message shapes to judge it in, comma-separated, or all (default: the shapes "
    "the target declares as ctxkit_shapes, its adapter's, an Amplifier module's, else openai)",
    "command": "a program that speaks the conformance protocol and holds the manager (any "
    "language; see PROTOCOL.md)",
    "profile": "how hard to search: quick, default or thorough",
    "seed": "Hypothesis seed (default 1, the command's, so runs repeat)",
    "allow": "a relaxation, e.g. hoisted-system or budget-tolerance=0.05 (repeat, or use commas)",
    "timeout": "seconds each operation on the target may take (10)",
    "deadline": "seconds the whole check may take (300)",
    "schedule": "how the run searches: single (default), overlap or serial (see `ctxkit "
    "conformance --help`)",
    "shrink_seconds": "seconds Hypothesis may shrink a failure per search, in the overlap and "
    "serial schedules (20)",
    "max_examples": "runs per search (default: the profile's)",
}
STRICT_HELP = "fail on recommended properties too"
TRUE = ("1", "true", "yes", "on")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ctxkit", "ctxkit conformance suite")
    for name, help_text in OPTIONS.items():
        action = "append" if name == "allow" else "store"
        group.addoption(
            f"--ctxkit-{name.replace('_', '-')}",
            dest=f"ctxkit_{name}",
            action=action,
            default=None,
            help=help_text,
        )
        parser.addini(f"ctxkit_{name}", help_text, default=None)
    group.addoption(
        "--ctxkit-strict", dest="ctxkit_strict", action="store_const", const="1", help=STRICT_HELP
    )
    parser.addini("ctxkit_strict", STRICT_HELP, default=None)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "ctxkit_conformance: a ctxkit conformance property check")


def option(config: pytest.Config, name: str) -> str | None:
    """Command line over environment (``CTXKIT_<NAME>``) over ini (``ctxkit_<name>``)."""
    value = config.getoption(f"ctxkit_{name}", default=None)
    if isinstance(value, list):
        value = ",".join(value)
    if value is None:
        value = os.environ.get(f"CTXKIT_{name.upper()}")
    if value is None:
        value = config.getini(f"ctxkit_{name}")
    return value or None


def pytest_report_header(config: pytest.Config) -> str | None:
    target = option(config, "target")
    if target is None:
        return None
    allow = _allowed(config)
    shapes = option(config, "shapes")
    return (
        f"ctxkit conformance: target {target}, seed {option(config, 'seed') or DEFAULT_SEED}, "
        f"profile {option(config, 'profile') or 'default'}, "
        + (f"shapes {shapes}" if shapes else "shapes as the target speaks them")
        + (f", allowing {', '.join(allow)}" if allow else "")
    )


def _allowed(config: pytest.Config) -> list[str]:
    """The relaxations asked for: ``--ctxkit-allow`` repeated or with commas (or the
    environment's or the ini file's, with commas)."""
    return [a.strip() for a in (option(config, "allow") or "").split(",") if a.strip()]


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """A suite with nothing to check is a mistake, not a skip: silently green in CI; so is a
    shape no one knows (said before anything runs)."""
    for item in items:
        suite = getattr(item, "cls", None)
        if suite is None or not issubclass(suite, ConformanceSuite):
            continue
        _shapes(getattr(suite, "shapes", None) or option(config, "shapes"))
        if not (
            getattr(suite, "target", None)
            or getattr(suite, "command", None)
            or option(config, "target")
            or option(config, "command")
        ):
            raise pytest.UsageError(
                f"ctxkit conformance: {suite.__name__} has no target: set `target` on the "
                "class, or pass --ctxkit-target (or CTXKIT_TARGET), e.g. "
                "--ctxkit-target mypkg.context:MyManager"
            )


_REPORTS: dict[tuple[Any, ...], Any] = {}


class _CannotCheck:
    """What the plugin keeps when the target cannot be checked: said once, in one test."""

    def __init__(self, message: str) -> None:
        self.message = message
        self.said = False


@pytest.fixture
def ctxkit_report(request: pytest.FixtureRequest) -> Any:
    """The suite's report for the class's target, run once per target and session."""
    from ctxkit.conformance.runner import RunOptions, SetupError, run

    suite = request.cls
    config = request.config
    target = getattr(suite, "target", None) or option(config, "target")
    command = getattr(suite, "command", None) or option(config, "command")
    try:
        settings = dict(
            getattr(suite, "config", None) or json.loads(option(config, "config") or "{}")
        )
        seed = int(option(config, "seed") or DEFAULT_SEED)
        timeout = float(option(config, "timeout") or 10)
        deadline = float(option(config, "deadline") or 300)
        shrink_seconds = float(option(config, "shrink_seconds") or 20)
        runs = option(config, "max_examples")
        max_examples = int(runs) if runs is not None else None
    except (TypeError, ValueError) as exc:
        raise pytest.UsageError(f"ctxkit conformance: bad option: {exc}") from None
    profile = getattr(suite, "profile", None) or option(config, "profile") or "default"
    schedule = getattr(suite, "schedule", None) or option(config, "schedule") or DEFAULT_SCHEDULE
    form = getattr(suite, "form", None) or option(config, "form")
    if form is not None and form not in ("contract", "function", "session", "compacting"):
        raise pytest.UsageError(
            f"ctxkit conformance: form {form!r}: the forms are contract, function, session and "
            "compacting"
        )
    allow = _allowed(config)
    shapes = _shapes(getattr(suite, "shapes", None) or option(config, "shapes"))
    key = (
        target,
        shapes,
        command,
        json.dumps(settings, sort_keys=True),
        seed,
        profile,
        schedule,
        tuple(allow),
        timeout,
        deadline,
        shrink_seconds,
        max_examples,
        form,
    )
    if key not in _REPORTS:
        options = RunOptions(
            target=target,
            implementation=command,
            config=settings,
            seed=seed,
            profile=profile,
            schedule=schedule,
            allow=allow,
            timeout=timeout,
            deadline=deadline,
            shrink_seconds=shrink_seconds,
            max_examples=max_examples,
            form=form,
            shapes=shapes,
        )
        try:
            _REPORTS[key] = run(options)
        except SetupError as exc:
            what = target or command
            _REPORTS[key] = _CannotCheck(f"ctxkit conformance: cannot check {what}: {exc}")
    return _REPORTS[key]


def _shapes(value: Any) -> tuple[str, ...] | None:
    """``--ctxkit-shapes`` or the suite's ``shapes``: None for the shapes the target speaks."""
    if value is None:
        return None
    from ctxkit.shapes.spoken import ShapeError, parse_shapes

    try:
        return parse_shapes(value, "ctxkit shapes")
    except ShapeError as exc:
        raise pytest.UsageError(f"ctxkit conformance: {exc}") from None


def _detail(report: Any, result: Any) -> str:
    """What ``ctxkit conformance`` prints for one failed property."""
    lines = [
        f"{result.id} {result.status} ({result.level}): {result.message}",
        f"what must hold: {by_id(result.id).holds}",
        f"target {report.target}, seed {report.seed}, profile {report.profile}",
    ]
    if report.shapes is not None:
        lines.append(f"judged in {', '.join(report.shapes.shapes)}: {report.shapes.why}")
    if result.reproducer:
        lines += [
            f"reproducer ({result.verification or 'not verified'}):",
            "",
            textwrap.indent(result.reproducer, "    "),
        ]
    return "\n".join(lines)


class ConformanceSuite:
    """Subclass with ``target`` (and optionally ``config``, ``profile``, ``form``, ``shapes``:
    the shapes to judge it in, and ``command`` for a manager in another language) set."""

    target: ClassVar[str | None] = None
    form: ClassVar[str | None] = None
    shapes: ClassVar[str | tuple[str, ...] | list[str] | None] = None
    command: ClassVar[str | None] = None
    config: ClassVar[dict[str, Any] | None] = None
    profile: ClassVar[str | None] = None

    @pytest.mark.ctxkit_conformance
    @pytest.mark.parametrize("property_id", [p.id for p in PROPERTIES])
    def test_property(
        self, property_id: str, ctxkit_report: Any, request: pytest.FixtureRequest
    ) -> None:
        if isinstance(ctxkit_report, _CannotCheck):
            if ctxkit_report.said:
                pytest.skip("not checked: the target could not be loaded (see the first error)")
            ctxkit_report.said = True
            pytest.fail(ctxkit_report.message, pytrace=False)
        result = next(p for p in ctxkit_report.properties if p.id == property_id)
        if result.status == "skipped":
            pytest.skip(result.message or "not checked")
        if result.status == "passed":
            if ctxkit_report.verdict == "inconclusive" and result.level == "required":
                from ctxkit.conformance.reports.formats import inconclusive

                pytest.fail(
                    f"{property_id} held, but was never tested where the manager compacts: "
                    + inconclusive(ctxkit_report),
                    pytrace=False,
                )
            return
        if result.status == "below":  # an advisory figure under its bar fails no test run
            pytest.xfail(f"{property_id} ({result.level}): {result.message}")
        detail = _detail(ctxkit_report, result)
        strict = (option(request.config, "strict") or "").lower() in TRUE
        if result.level == "recommended" and not strict:
            pytest.xfail(detail)
        pytest.fail(detail, pytrace=False)
