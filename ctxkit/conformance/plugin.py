"""pytest plugin: run the conformance suite inside your own test run.

Subclass :class:`ConformanceSuite` in a test module::

    from ctxkit.conformance.plugin import ConformanceSuite

    class TestMyManager(ConformanceSuite):
        target = "mypkg.context:MyManager"
        config = {"max_tokens": 8000}

or point pytest at the packaged suite: ``pytest --pyargs ctxkit.conformance.suite --ctxkit-target
mypkg.context:MyManager``. One test per property; recommended properties that fail are
reported as xfail unless ``--ctxkit-strict``. The suite runs once per target and session.

Options (command line over environment over ini): ``--ctxkit-target`` / ``CTXKIT_TARGET`` /
``ctxkit_target``, ``--ctxkit-config`` (JSON), ``--ctxkit-profile`` (quick, default,
thorough), ``--ctxkit-seed``, ``--ctxkit-allow`` (comma-separated), ``--ctxkit-strict``.
"""

from __future__ import annotations

import json
import os
from typing import Any, ClassVar

import pytest

from ctxkit.conformance.properties import PROPERTIES

__all__ = ["ConformanceSuite"]

OPTIONS = {
    "target": "the context manager to check (module:attr, module, ep:NAME, file.py)",
    "config": "JSON object: the target's keyword arguments or mount() config",
    "profile": "how hard to search: quick, default or thorough",
    "seed": "Hypothesis seed (default 0, so runs repeat)",
    "allow": "comma-separated relaxations, e.g. hoisted-system,budget-tolerance=0.05",
    "strict": "fail on recommended properties too (1/true)",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ctxkit", "ctxkit conformance suite")
    for name, help_text in OPTIONS.items():
        group.addoption(f"--ctxkit-{name}", dest=f"ctxkit_{name}", default=None, help=help_text)
        parser.addini(f"ctxkit_{name}", help_text, default=None)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "ctxkit_conformance: a ctxkit conformance property check")


def option(config: pytest.Config, name: str) -> str | None:
    """Command line over environment (``CTXKIT_<NAME>``) over ini (``ctxkit_<name>``)."""
    value = config.getoption(f"ctxkit_{name}", default=None)
    if value is None:
        value = os.environ.get(f"CTXKIT_{name.upper()}")
    if value is None:
        value = config.getini(f"ctxkit_{name}")
    return value or None


def pytest_report_header(config: pytest.Config) -> str | None:
    target = option(config, "target")
    if target is None:
        return None
    return (
        f"ctxkit conformance: target {target}, seed {option(config, 'seed') or 0}, "
        f"profile {option(config, 'profile') or 'default'}"
    )


_REPORTS: dict[tuple[Any, ...], Any] = {}


@pytest.fixture
def ctxkit_report(request: pytest.FixtureRequest) -> Any:
    """The suite's report for the class's target, run once per target and session."""
    from ctxkit.conformance.runner import RunOptions, run

    suite = request.cls
    config = request.config
    target = getattr(suite, "target", None) or option(config, "target")
    if target is None:
        pytest.skip("no target: set `target` on the class or pass --ctxkit-target")
    settings = dict(getattr(suite, "config", None) or json.loads(option(config, "config") or "{}"))
    seed = int(option(config, "seed") or 0)
    profile = getattr(suite, "profile", None) or option(config, "profile") or "default"
    allow = [a for a in (option(config, "allow") or "").split(",") if a]
    key = (target, json.dumps(settings, sort_keys=True), seed, profile, tuple(allow))
    if key not in _REPORTS:
        _REPORTS[key] = run(
            RunOptions(target=target, config=settings, seed=seed, profile=profile, allow=allow)
        )
    return _REPORTS[key]


class ConformanceSuite:
    """Subclass with ``target`` (and optionally ``config``, ``profile``) set."""

    target: ClassVar[str | None] = None
    config: ClassVar[dict[str, Any] | None] = None
    profile: ClassVar[str | None] = None

    @pytest.mark.ctxkit_conformance
    @pytest.mark.parametrize("property_id", [p.id for p in PROPERTIES])
    def test_property(
        self, property_id: str, ctxkit_report: Any, request: pytest.FixtureRequest
    ) -> None:
        result = next(p for p in ctxkit_report.properties if p.id == property_id)
        if result.status == "skipped":
            pytest.skip(result.message or "not checked")
        if result.status == "passed":
            return
        detail = f"{property_id} {result.status}: {result.message}"
        if result.reproducer:
            detail += "\n\nreproducer:\n" + result.reproducer
        strict = (option(request.config, "strict") or "").lower() in ("1", "true", "yes")
        if result.level == "recommended" and not strict:
            pytest.xfail(detail)
        pytest.fail(detail, pytrace=False)
