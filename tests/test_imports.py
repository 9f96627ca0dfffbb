"""How ctxkit's modules import one another: never in a circle, and the command line's modules
only through its two shared ones (issue 14, item 13).

Imports inside functions count too: a lazy import that closes a circle still makes the order
in which modules load matter, which is how circles break.
"""

from __future__ import annotations

import ast
import functools
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "ctxkit"


def _module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


MODULES = _module_names()


def _owner(name: str) -> str | None:
    """The ctxkit module that ``name`` (a module or a name in one) belongs to."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str) -> set[str]:
    """Every ctxkit module ``module`` imports, at any level of its code."""
    found = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found.update(_owner(name) for name in names if name.startswith("ctxkit"))
    found.discard(None)
    found.discard(module)
    return found  # type: ignore[return-value]


@functools.cache
def graph() -> dict[str, set[str]]:
    """Each module's ctxkit imports: read when a test first asks, not when the file is
    collected (every xdist worker collects every file; parsing the package costs half a
    second)."""
    return {module: imports_of(module) for module in MODULES}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for other in graph[module]:
            if other not in order:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], order[other])
        if low[module] == order[module]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in graph:
        if module not in order:
            visit(module)
    return found


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_module_of_ctxkit_imports_itself_back_through_others():
    assert len(graph()) > 50  # the whole package was read
    assert circles(graph()) == []


COMMANDS = sorted(
    m
    for m in MODULES
    if m.startswith("ctxkit.cli.") and m.count(".") == 2 and m != "ctxkit.cli.__main__"
)
SHARED = {"ctxkit.cli.errors", "ctxkit.cli.options", "ctxkit.cli.output", "ctxkit.cli.signals"}


@pytest.mark.parametrize("module", COMMANDS)
def test_a_cli_module_reaches_the_cli_only_through_the_shared_modules(module: str):
    cli = {m for m in graph()[module] if m == "ctxkit.cli" or m.startswith("ctxkit.cli.")}
    if module in SHARED:
        assert cli <= {"ctxkit.cli.errors"}, f"{module} imports {cli}"
    else:
        assert "ctxkit.cli" not in cli, f"{module} imports the package that imports it"
    importlib.import_module(module)


def test_every_command_has_a_module_the_parser_builds_from():
    from ctxkit.cli import COMMANDS as LISTED

    assert {f"ctxkit.cli.{name}" for name in LISTED} == set(COMMANDS) - SHARED


# The conformance suite's four jobs, lowest first: a job imports only those before it (issue 23,
# item 8). The entry points at the package's top (runner, plugin, worker, replay) use them all.
JOBS = ["judge", "targets", "search", "reports"]
SUITE = "ctxkit.conformance"


def _job(module: str) -> str | None:
    """The job a module of the suite does, or None for the top-level entry points."""
    rest = module.removeprefix(SUITE + ".").split(".")
    return rest[0] if module.startswith(SUITE + ".") and rest[0] in JOBS else None


@pytest.mark.parametrize("job", JOBS)
def test_the_suites_jobs_import_one_way(job: str):
    members = [m for m in MODULES if _job(m) == job and m != f"{SUITE}.{job}"]
    assert members, f"{SUITE}.{job} has no modules"
    allowed = set(JOBS[: JOBS.index(job) + 1])
    for module in members:
        wrong = {
            other
            for other in graph()[module]
            if other.startswith(SUITE) and other != SUITE and _job(other) not in allowed
        }
        assert not wrong, f"{module} ({job}) imports {sorted(wrong)}"


# The layers beneath the suite, the survey and the command line (issue 31, item 9): the shapes
# know only themselves; the adapters build on the shapes, messages, tokens and forms, never on
# what judges or shows them (the suite, the survey, the CLI), so that importing an adapter
# loads none of those.
BENEATH = {
    "ctxkit.shapes": {"ctxkit.shapes"},
    "ctxkit.adapters": {
        "ctxkit.adapters",
        "ctxkit.shapes",
        "ctxkit.messages",
        "ctxkit.tokens",
        "ctxkit.forms",
        "ctxkit.literal",
        "ctxkit.extras",
    },
}


@pytest.mark.parametrize("package", sorted(BENEATH))
def test_the_lower_layers_import_nothing_above_them(package: str):
    allowed = BENEATH[package]
    for module in (m for m in MODULES if m == package or m.startswith(package + ".")):
        wrong = {
            other
            for other in graph()[module]
            if not any(other == a or other.startswith(a + ".") for a in allowed)
        }
        assert not wrong, f"{module} imports {sorted(wrong)}, above {package}"
