"""Reproducer scripts are valid Python by construction, whatever the messages hold."""

from __future__ import annotations

import ast
import json
import math
import os
import runpy
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxkit.conformance.judge.allow import Relaxations
from ctxkit.conformance.judge.steps import Call, Check, Request
from ctxkit.conformance.reports.reproducer import (
    Build,
    Reproduction,
    file_name,
    literal,
    placed,
    render_script,
    render_steps,
)

# Any JSON-like value, with the awkward corners: surrogates, control and line-separator
# characters, quotes and backslashes, non-finite floats, big ints, deep nesting.
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(st.characters(codec=None), max_size=40),
    st.sampled_from(["'", '"', "'\"", "\\", '"""', "\u2028", "\x0c", "\r\n", "\ud800", "x" * 300]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=30,
)


def same(a: Any, b: Any) -> bool:
    """Equal, with NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def evaluate(source: str) -> Any:
    return eval(compile(source, "<literal>", "eval"), {"json": json})


@settings(max_examples=300)
@given(value=values, indent=st.sampled_from([0, 4, 8]))
def test_a_literal_evaluates_to_the_value(value: Any, indent: int) -> None:
    source = literal(value, indent)
    assert same(evaluate(source), value)
    # A literal spread over lines is valid wherever it is indented (inside a function body).
    ast.parse("def f():\n    x = " + source.replace("\n", "\n    ") + "\n")


def test_deep_nesting_becomes_json_and_long_runs_stay_short() -> None:
    deep: Any = "leaf"
    for _ in range(300):
        deep = [deep]
    assert literal(deep).startswith("json.loads(")
    assert evaluate(literal(deep)) == deep
    assert literal("y" * 24_000) == '"y" * 24000'
    assert literal(float("nan")) == 'float("nan")'


messages = st.dictionaries(
    st.sampled_from(["role", "content", "tool_calls", "tool_call_id", "name", "x"]),
    values,
    max_size=4,
)
requests = st.builds(
    Request,
    token_budget=st.none() | st.integers(1, 10**6),
    defaults=st.none() | st.fixed_dictionaries({"context_window": st.integers(1, 10**6)}),
)
calls = st.one_of(
    st.builds(
        Call,
        op=st.sampled_from(["add", "add_then_edit", "add_bad"]),
        value=messages,
        note=st.text(max_size=30),
    ),
    st.builds(
        Call,
        op=st.sampled_from(["add_concurrently", "set", "set_then_edit"]),
        value=st.lists(messages, max_size=3),
    ),
    st.builds(
        Call,
        op=st.sampled_from(["request", "request_then_edit"]),
        value=requests,
        tolerated=st.booleans(),
        timeout=st.none() | st.floats(0.1, 60),
        name=st.sampled_from(["view", "again"]),
    ),
    st.builds(Call, op=st.sampled_from(["get_then_edit", "clear"])),
)
checks = st.one_of(
    st.builds(
        Check,
        kind=st.sampled_from(
            [
                "raises",
                "returns",
                "crashes",
                "refuses",
                "is_list",
                "tool_pairs",
                "empty_view",
                "same_view",
                "not_edited",
                "events",
            ]
        ),
    ),
    st.builds(
        Check,
        kind=st.sampled_from(["ordering", "preserved"]),
        args=st.fixed_dictionaries(
            {
                "history": st.lists(messages, max_size=3),
                "allow": st.just(Relaxations(hoisted_system=True)),
            }
        ),
    ),
    st.builds(
        Check, kind=st.just("fits"), args=st.fixed_dictionaries({"budget": st.integers(1, 10**6)})
    ),
    st.builds(
        Check,
        kind=st.just("history"),
        args=st.fixed_dictionaries(
            {"expected": st.lists(messages, max_size=3), "property": st.sampled_from(["lifecycle"])}
        ),
    ),
    st.builds(
        Check,
        kind=st.just("stored_all"),
        args=st.fixed_dictionaries(
            {"before": st.lists(messages, max_size=2), "added": st.lists(messages, max_size=2)}
        ),
    ),
)


@settings(max_examples=200)
@given(
    calls=st.lists(calls, max_size=6),
    check=checks,
    message=st.text(st.characters(codec=None), max_size=200),
    target=st.text(max_size=30),
    config=st.dictionaries(st.text(max_size=8), values, max_size=3),
)
def test_every_script_is_valid_python(
    calls: list[Call], check: Check, message: str, target: str, config: dict[str, Any]
) -> None:
    repro = Reproduction(
        target=target,
        config=config,
        property_id="ordering",
        level="required",
        message=message,
        calls=calls,
        check=check,
        command=f"ctxkit conformance {message}",
    )
    script = render_script(repro)
    tree = ast.parse(script)
    assert ast.get_docstring(tree) is not None
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    assert imported == {"ctxkit.conformance.replay"}
    assert "def test_ordering() -> None:" in script
    assert len(render_steps(repro)) == len(calls) + 1


# -- the file name ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "name"),
    [
        ("tests.zoo.pairs:SplitsPairsOpenAI", "test_ordering_tests_zoo_pairs_SplitsPairsOpenAI.py"),
        ("./agents/my manager.py:Window", "test_ordering_agents_my_manager_py_Window.py"),
        ("langchain:trim_messages", "test_ordering_langchain_trim_messages.py"),
        (None, "test_ordering_reference.py"),
        ("::", "test_ordering_target.py"),
    ],
)
def test_a_reproducer_is_named_for_pytest_to_collect(target: str | None, name: str) -> None:
    assert file_name("ordering", target) == name


@given(target=st.text(max_size=200))
def test_every_file_name_is_a_test_module_name(target: str) -> None:
    name = file_name("tool_pair_integrity", target)
    assert name.startswith("test_tool_pair_integrity_")
    assert name.removesuffix(".py").isidentifier()
    assert len(name) < 120


# -- the manager built by import ----------------------------------------------------------------

builds = st.builds(
    Build,
    module=st.sampled_from(["mypkg.context", "check", "manager_mod"]),
    attr=st.sampled_from(["SlidingWindow", "Outer.Inner", "check", "manager", "reproduce"]),
    kind=st.sampled_from(
        [
            "factory",
            "mount",
            "function",
            "session",
            "session_object",
            "compacting",
            "compacting_object",
        ]
    ),
    hooks=st.booleans(),
    awaits=st.booleans(),
    pythonpath=st.none()
    | st.sampled_from(["/home/me/project", "/home/me/project/src", "/opt/libs", "/home/me/p"])
    | st.text(st.characters(codec=None), max_size=30),
)

PROJECT = "/home/me/project"
"""The folder the run of a rendered script is said to be started in."""


@settings(max_examples=200)
@given(calls=st.lists(calls, max_size=4), check=checks, build=builds)
def test_every_script_built_by_import_is_valid_python(
    calls: list[Call], check: Check, build: Build
) -> None:
    repro = Reproduction(
        target="ignored:Target",
        config={"max_tokens": 100},
        property_id="ordering",
        level="required",
        message="m",
        calls=calls,
        check=check,
        command="ctxkit conformance ...",
        build=build,
    )
    script = render_script(repro, project=PROJECT)
    tree = ast.parse(script)
    assert ast.get_docstring(tree) is not None
    imported = {n.module: n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert build.module in imported
    (alias,) = imported[build.module].names
    assert alias.name == build.attr.split(".")[0]
    bound = alias.asname or alias.name
    assert bound not in {"check", "manager", "reproduce", "CONFIG"}  # renamed, not shadowed
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert not names & {"open_manager", "TARGET"}  # built by import, not by a target string
    put_first = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and ast.unparse(n.func) == "sys.path.insert"
    ]
    assert bool(put_first) == bool(build.pythonpath)
    if put_first:  # the folder as given, read from the run's folder, before the import
        (insert,) = put_first
        folder = eval(ast.unparse(insert.args[1]), {"os": os, "PROJECT": PROJECT})
        assert os.path.normpath(os.path.join(PROJECT, folder)) == os.path.normpath(
            os.path.join(PROJECT, build.pythonpath)
        )
        assert insert.lineno < imported[build.module].lineno
        inside = os.path.commonpath([PROJECT, os.path.join(PROJECT, build.pythonpath)])
        # found from PROJECT when in it, then no absolute path of it is written
        assert ("PROJECT" in ast.unparse(insert)) == (inside == PROJECT)
        assert (f'"{PROJECT}' not in script) or inside != PROJECT


MODULE = """
from __future__ import annotations


class Window:
    \"\"\"Keeps every message; a view is the newest ``keep``.\"\"\"

    def __init__(self, keep: int = 10, hooks=None) -> None:
        self.keep, self.hooks, self.messages = keep, hooks, []

    async def add_message(self, message):
        self.messages.append(dict(message))

    async def get_messages_for_request(self, token_budget=None, provider=None):
        return [dict(m) for m in self.messages[-self.keep :]]

    async def get_messages(self):
        return [dict(m) for m in self.messages]

    async def set_messages(self, messages):
        self.messages = [dict(m) for m in messages]

    async def clear(self):
        self.messages = []


class Outer:
    Inner = Window


async def make(keep: int = 10):
    return Window(keep)


async def mount(coordinator, config):
    await coordinator.mount("context", Window(**config))


def keep_last(messages, keep: int = 10):
    return messages[-keep:]


class Store:
    def __init__(self, keep: int = 10) -> None:
        self.items = []

    async def add_items(self, items):
        self.items.extend(items)

    async def get_items(self, limit=None):
        return list(self.items if limit is None else self.items[-limit:])

    async def pop_item(self):
        return self.items.pop() if self.items else None

    async def clear_session(self):
        self.items = []


STORE = Store()


class Compacting:
    \"\"\"Amplifier's first contract: compact() keeps the newest ``keep``.\"\"\"

    def __init__(self, keep: int = 10) -> None:
        self.keep, self.messages = keep, []

    async def add_message(self, message):
        self.messages.append(dict(message))

    async def get_messages(self):
        return [dict(m) for m in self.messages]

    async def should_compact(self):
        return len(self.messages) > self.keep

    async def compact(self):
        self.messages = self.messages[-self.keep :]

    async def clear(self):
        self.messages = []


COMPACTING = Compacting()
"""


@pytest.mark.parametrize(
    ("kind", "attr", "awaits"),
    [
        ("factory", "Window", False),
        ("factory", "Outer.Inner", False),
        ("factory", "make", True),
        ("mount", "mount", False),
        ("function", "keep_last", False),
        ("session", "Store", False),
        ("session_object", "STORE", False),
        ("compacting", "Compacting", False),
        ("compacting_object", "COMPACTING", False),
    ],
)
def test_a_script_builds_each_form_by_import_and_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, attr: str, awaits: bool
) -> None:
    """A script for each kind of build runs against a real module: the manager it builds
    holds what it was given, and the check fails when it does not."""
    module = f"managers_{uuid.uuid4().hex}"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    message = {"role": "user", "content": "hi"}
    request = Call("request", Request(token_budget=1000))

    def script(expected: list[dict[str, Any]]) -> Path:
        repro = Reproduction(
            target=f"{module}:{attr}",
            config={"keep": 5}
            if kind not in ("session_object", "compacting_object", "mount")
            else {},
            property_id="non_destructive",
            level="required",
            message="m",
            calls=[Call("add", message), request],
            check=Check("history", {"expected": expected, "property": "non_destructive"}),
            command="ctxkit conformance ...",
            build=Build(module, attr, kind, hooks=kind == "factory" and not awaits, awaits=awaits),
        )
        path = tmp_path / f"test_{kind}_{len(expected)}.py"
        path.write_text(render_script(repro))
        return path

    test = runpy.run_path(str(script([message])))["test_non_destructive"]
    test()  # the manager holds the message: the check passes
    failing = runpy.run_path(str(script([message, message])))["test_non_destructive"]
    with pytest.raises(AssertionError, match="non_destructive"):
        failing()
    sys.modules.pop(module, None)


def test_calls_that_end_the_process_run_apart_under_pytest() -> None:
    repro = Reproduction(
        target="mypkg:Window",
        config={},
        property_id="lifecycle",
        level="required",
        message="the target's process died",
        calls=[Call("request", Request(token_budget=10))],
        check=Check("crashes", {"status": -11}),
        command="ctxkit conformance mypkg:Window",
        build=Build("mypkg", "Window"),
    )
    script = render_script(repro)
    assert "def test_lifecycle() -> None:\n" in script
    assert "    run_apart(__file__)\n" in script
    assert script.endswith('if __name__ == "__main__":\n    asyncio.run(reproduce())\n')


# -- where a script finds the run's folder ------------------------------------------------------


def _header(script: str) -> str:
    """The script's lines up to the one that sets ``PROJECT``: they say where it is."""
    lines = script.split('\n"""\n', 1)[1].splitlines()
    (end,) = [k for k, line in enumerate(lines) if line.startswith("PROJECT = ")]
    return "\n".join(lines[: end + 1])


def _found(script: str, path: Path, cwd: Path, monkeypatch: pytest.MonkeyPatch, **env: str) -> Any:
    """``PROJECT`` as the script at ``path`` computes it, run from ``cwd`` with ``env``."""
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("CTXKIT_PROJECT_ROOT", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    namespace: dict[str, Any] = {"__file__": str(path)}
    exec(compile(_header(script), str(path), "exec"), namespace)
    return namespace["PROJECT"]


def _repro(target: str, build: Build | None = None) -> Reproduction:
    return Reproduction(
        target=target,
        config={},
        property_id="tool_pair_integrity",
        level="required",
        message="m",
        calls=[Call("request", Request(token_budget=100))],
        check=Check("tool_pairs"),
        command="ctxkit conformance ...",
        remote=build is None,
        build=build,
    )


@pytest.mark.parametrize("where", ["tests/repro", ".", "deep/er/still", "../elsewhere"])
def test_a_written_script_finds_the_project_from_its_own_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Written into ``where`` (from the project), a script finds the project from its own
    file, wherever it is run from and whatever the variable says, and names no absolute path
    of it; moved with the project, it finds the new one."""
    project = tmp_path / "made" / "project"
    folder = project / where
    folder.mkdir(parents=True)
    unplaced = render_script(
        _repro("mypkg:Window", Build("mypkg", "Window", pythonpath=str(project))),
        project=str(project),
    )
    script = placed(unplaced, folder, str(project))
    assert str(tmp_path) not in script
    path = folder / "test_it.py"
    elsewhere = tmp_path / "unrelated"
    elsewhere.mkdir()
    found = _found(script, path, elsewhere, monkeypatch, CTXKIT_PROJECT_ROOT="/nowhere")
    assert found == str(project)
    clone = tmp_path / "clone" / "project"
    (clone / where).mkdir(parents=True)
    assert _found(script, clone / where / "test_it.py", elsewhere, monkeypatch) == str(clone)


def test_the_reports_script_finds_the_project_from_the_variable_or_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = render_script(
        _repro("mypkg:Window", Build("mypkg", "Window", pythonpath=str(tmp_path))),
        project=str(tmp_path),
    )
    assert str(tmp_path) not in script
    assert "CTXKIT_PROJECT_ROOT" in _header(script)
    path = tmp_path / "saved" / "test_it.py"
    path.parent.mkdir()
    assert _found(script, path, tmp_path, monkeypatch) == str(tmp_path)
    assert _found(script, path, path.parent, monkeypatch, CTXKIT_PROJECT_ROOT="/x") == "/x"


@pytest.mark.parametrize(
    ("target", "file", "export"),
    [
        ("./manager.mjs:Window", "manager.mjs", ":Window"),
        ("js/manager.cjs", "js/manager.cjs", ""),
        ("agents/my-manager.py:Window", "agents/my-manager.py", ":Window"),
    ],
)
def test_a_target_named_by_its_file_is_found_from_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, file: str, export: str
) -> None:
    script = placed(
        render_script(_repro(target), project=str(tmp_path)), tmp_path / "repro", str(tmp_path)
    )
    tree = ast.parse(script)
    (assigned,) = [
        n for n in tree.body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "TARGET"
    ]
    found = eval(ast.unparse(assigned.value), {"os": os, "PROJECT": "/clone"})
    assert found == f"/clone/{file}{export}"
    assert str(tmp_path) not in script


@pytest.mark.parametrize(
    "target", ["js:ai:pruneMessages", "langchain:trim_messages", "/opt/managers/m.mjs:W"]
)
def test_a_target_not_in_the_project_is_named_as_it_was(tmp_path: Path, target: str) -> None:
    script = render_script(_repro(target), project=str(tmp_path))
    assert f"TARGET = {literal(target)}\n" in script
    assert "PROJECT" not in script
    assert placed(script, tmp_path, str(tmp_path)) == script
