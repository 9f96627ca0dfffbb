"""Reproducer scripts: the calls of a failing run and its failed check, as Python.

Valid Python by construction: every value goes through :func:`literal`, which writes only
Python literals (and ``float("nan")``, ``json.loads(...)`` for what literals cannot say), and
every statement is laid out here, never pasted from text. A script is a pytest test file
(:func:`file_name`: ``test_<property>_<target>.py``) that also runs as a script (a non-zero
exit while the bug is there).

A Python target is built as a user's own test would build it: imported by its module name
(``from mypkg.context import SlidingWindow``) and called with the config
(``SlidingWindow(**CONFIG)``), or wrapped in its form (:mod:`ctxkit.forms`). A target in
another language (JavaScript, ``--command``, gRPC) is opened by its TARGET string through
:func:`ctxkit.conformance.replay.open_manager`. Calls that end the process run in a child
process under pytest, so the test fails rather than pytest dying with them.

A script names no absolute path of the project, so it can be committed with it. What the run
found in the folder it was started in (the folder a module imports from, when only that folder
finds it; a file named as TARGET, ``manager.mjs:Window``) the script finds from ``PROJECT``,
that folder: written by ``--reproducers DIR`` (:func:`placed`), ``PROJECT`` is a path relative
to the script's own file, so ``pytest DIR`` and ``python FILE`` find it from any folder and in
any copy of the project; anywhere else (the JSON report's text, whose file is not known) it is
the folder ``CTXKIT_PROJECT_ROOT`` names, else the current one. A folder outside the project
is not part of it, and is written as it is (absolute).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxkit.conformance.judge.allow import Relaxations
from ctxkit.conformance.judge.invariants import ANNOTATION_KEYS
from ctxkit.conformance.judge.steps import Call, Check, Request
from ctxkit.literal import literal

__all__ = [
    "PROJECT_VARIABLE",
    "Build",
    "Reproduction",
    "file_name",
    "literal",
    "placed",
    "render_script",
    "render_steps",
]

PROJECT_VARIABLE = "CTXKIT_PROJECT_ROOT"
"""Names the folder a script not written by ``--reproducers`` takes for the run's own."""


def file_name(property_id: str, target: str | None) -> str:
    """The reproducer's file name: ``test_<property>_<target>.py``, the target made safe
    for a file and a module name (``tests.zoo.pairs:SplitsPairs`` ->
    ``test_ordering_tests_zoo_pairs_SplitsPairs.py``), so ``pytest DIR`` collects it."""
    safe = re.sub(r"[^A-Za-z0-9]+", "_", target or "reference").strip("_")[:80].rstrip("_")
    return f"test_{property_id}_{safe or 'target'}.py"


_WRAPPERS = {"session": "SessionManager", "compacting": "CompactingManager"}
"""The :mod:`ctxkit.forms` wrapper a script builds each wrapped form in."""


@dataclass(frozen=True)
class Build:
    """How a Python target is built by import (what the worker's ``hello`` said of it; see
    :meth:`ctxkit.conformance.targets.load.Target.import_form`)."""

    module: str
    attr: str
    kind: str = "factory"
    """``factory`` (a class or factory called with the config), ``mount``, ``function``,
    ``session`` (a factory of a session) or ``session_object`` (a session store)."""
    hooks: bool = False
    """The factory or function takes ``hooks``: it gets an event recorder."""
    awaits: bool = False
    """The factory is a coroutine function: its result is awaited."""
    pythonpath: str | None = None
    """The folder the module imports from, when only the run's directory finds it."""

    @classmethod
    def from_data(cls, data: Any) -> Build | None:
        """From the ``hello`` answer's ``build`` object; None when there is none or it is not
        one this renderer can write (a module or attribute that is not a dotted name)."""
        if not isinstance(data, Mapping):
            return None
        module, attr = data.get("module"), data.get("attr")
        if not isinstance(module, str) or not isinstance(attr, str):
            return None
        if not all(p.isidentifier() for p in (*module.split("."), *attr.split("."))):
            return None
        pythonpath = data.get("pythonpath")
        return cls(
            module,
            attr,
            str(data.get("kind") or "factory"),
            bool(data.get("hooks")),
            bool(data.get("awaits")),
            pythonpath if isinstance(pythonpath, str) else None,
        )


_TAKEN = frozenset(
    {
        "asyncio",
        "json",
        "CONFIG",
        "TARGET",
        "COMMAND",
        "FORM",
        "reproduce",
        "manager",
        "hooks",
        "events",
        "view",
        "again",
        "stored",
        "history",
        "expected",
        "before",
        "added",
        "message",
        "messages",
        "check",
        "Provider",
        "EventRecorder",
        "edit_in_place",
        "may_refuse",
        "mounted",
        "open_manager",
        "returns_within",
        "run_apart",
        "FunctionManager",
        "SessionManager",
        "inspect_message",
        "os",
        "sys",
        "HERE",
        "PROJECT",
    }
)
"""Names a script uses for itself: an imported target of the same name is renamed."""


@dataclass(frozen=True)
class Reproduction:
    """What a reproducer reproduces: the target as the run loaded it, and the failure."""

    target: str | None
    config: Mapping[str, Any]
    property_id: str
    level: str
    message: str
    calls: Sequence[Call]
    check: Check
    command: str
    """The ``ctxkit conformance ...`` command line that found it."""
    ignore: frozenset[str] = ANNOTATION_KEYS
    implementation: str | None = None
    """``--command``: the program that speaks the protocol for the target."""
    remote: bool = False
    """The target runs in another process (another language): the caller's edits and
    concurrent adds happen there, through the protocol."""
    form: str | None = None
    """``--form``: the form the run loaded the target in, when it was given."""
    build: Build | None = None
    """How the script imports and builds the target; None: by its TARGET string."""


def _docstring_text(text: str) -> str:
    """Text that cannot end the docstring or make it invalid: no backslash escapes, no
    closing quotes, nothing a UTF-8 file cannot hold."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    text = "".join(c if c.isprintable() or c == "\n" else repr(c)[1:-1] for c in text)
    return text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


def _docstring_lines(text: str, width: int = 92) -> list[str]:
    return _wrapped(_docstring_text(text), width)


def _comment_text(text: str) -> str:
    """Text for a comment: nothing that ends its line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _wrapped(text: str, width: int) -> list[str]:
    """Each paragraph of ``text`` in lines of at most ``width`` (a longer word alone)."""
    lines: list[str] = []
    for paragraph in text.splitlines() or [""]:
        words, line = paragraph.split(" "), ""
        for word in words:
            if line and len(line) + 1 + len(word) > width:
                lines.append(line)
                line = word
            else:
                line = f"{line} {word}" if line else word
        lines.append(line)
    return lines


def render_script(
    repro: Reproduction, *, folder: str | os.PathLike[str] | None = None, project: str | None = None
) -> str:
    """The whole script (see the module docstring). ``project``: the folder the run was
    started in (default: the current one); ``folder``: where the script is written, when that
    is known (see :func:`placed`)."""
    project = os.path.normpath(os.path.abspath(project or os.getcwd()))
    body = _Body(repro)
    for call in repro.calls:
        body.call(call)
    body.check(repro.check)
    test = f"test_{repro.property_id}"
    if repro.check.kind == "crashes":
        run = [
            "    # the calls end the process: they run in a process of their own, so pytest",
            "    # reports a failure instead of ending with them",
            f"    {body.use('run_apart')}(__file__)",
        ]
        main = "    asyncio.run(reproduce())"
    else:
        run, main = ["    asyncio.run(reproduce())"], f"    {test}()"
    local, local_in_project = _local_folder(repro.build, project)
    target = _target_file(repro, project)
    uses_project = local_in_project or bool(target)
    imports = ["import asyncio"] + (["import json"] if "json.loads(" in "".join(body.lines) else [])
    imports += ["import os"] if uses_project else []
    imports += ["import sys"] if local else []
    froms = list(body.imports)
    if body.names:
        froms.append(("ctxkit.conformance.replay", ", ".join(sorted(body.names))))
    after_path = "  # noqa: E402" if local else ""
    before = [*(_UNPLACED if local_in_project else []), *local, *([""] if local else [])]
    after = [*_UNPLACED, ""] if target else []
    how = (
        "Run it with pytest, or with python: it fails (a non-zero exit) while the bug is "
        f"there. pytest collects it as {test}."
    )
    script = "\n".join(
        [
            f'"""Reproduces a ctxkit conformance failure: {repro.property_id} ({repro.level}).',
            "",
            *_docstring_lines(repro.message),
            "",
            f"Found by: {_docstring_text(repro.command)}",
            *_docstring_lines(how),
            '"""',
            "",
            *imports,
            "",
            *before,
            *(f"from {module} import {names}{after_path}" for module, names in sorted(froms)),
            "",
            *after,
            *_constants(repro, target),
            "",
            "",
            "async def reproduce() -> None:",
            *("    " + line if line else "" for line in body.lines),
            "",
            "",
            f"def {test}() -> None:",
            *run,
            "",
            "",
            'if __name__ == "__main__":',
            main,
            "",
        ]
    )
    return script if folder is None else placed(script, folder, project)


_PROJECT_IS = "PROJECT is the folder `ctxkit conformance` ran in, where it found the target:"


def _comment(text: str) -> list[str]:
    return [f"# {line}" for line in _wrapped(_comment_text(text), 90)]


_UNPLACED = [
    *_comment(
        f"{_PROJECT_IS} the folder {PROJECT_VARIABLE} names, else the current one (run this "
        "from that folder, or set the variable to it)."
    ),
    f'PROJECT = os.environ.get("{PROJECT_VARIABLE}") or os.getcwd()',
]
"""How a script finds the run's folder when where it will be kept is not known."""


def placed(script: str, folder: str | os.PathLike[str], project: str | None = None) -> str:
    """The script as written into ``folder`` (``--reproducers DIR``): it finds ``PROJECT``,
    the folder the run was started in (``project``, by default the current one), by a path
    relative to its own file, from wherever it is run and in any copy of the project that
    keeps the two where they are to each other. A script that needs no ``PROJECT`` is
    returned as it is."""
    docstring, end, rest = script.partition('\n"""\n')  # no line of the text is only quotes
    unplaced = "\n".join(_UNPLACED) + "\n"
    if not end or unplaced not in rest:
        return script
    here = os.path.realpath(folder)
    up = os.path.relpath(os.path.realpath(project or os.getcwd()), here).replace(os.sep, "/")
    where = "this file's own folder" if up == "." else f"{up} from this file's folder"
    lines = _comment(
        f"{_PROJECT_IS} {where}, so the script finds it from wherever it is run, in any copy "
        "of the project."
    )
    if up == ".":
        lines.append("PROJECT = os.path.dirname(os.path.realpath(__file__))")
    else:
        lines.append("HERE = os.path.dirname(os.path.realpath(__file__))")
        lines.append(f"PROJECT = os.path.normpath(os.path.join(HERE, {literal(up)}))")
    return docstring + end + rest.replace(unplaced, "\n".join(lines) + "\n", 1)


def _within(path: str, project: str) -> str | None:
    """``path`` (absolute, or relative to ``project``) relative to ``project`` when it lies
    in it (``.`` for the folder itself), with ``/`` between its parts; None when outside."""
    path = os.path.normpath(os.path.join(project, path))
    try:
        if os.path.commonpath([path, project]) != project:
            return None
    except ValueError:
        return None
    return os.path.relpath(path, project).replace(os.sep, "/")


def _in_project(relative: str) -> str:
    """The expression for a path ``relative`` to the run's folder."""
    return "PROJECT" if relative == "." else f"os.path.join(PROJECT, {literal(relative)})"


def _local_folder(build: Build | None, project: str) -> tuple[list[str], bool]:
    """When the target's module imports only from one folder (the one the run was started in,
    a file's folder, ``PYTHONPATH``): that folder put first on ``sys.path``, so that a plain
    ``pytest DIR`` and ``python FILE`` import the target from wherever they run; found from
    ``PROJECT`` when it lies in the run's folder (then True)."""
    if build is None or not build.pythonpath:
        return [], False
    relative = _within(build.pythonpath, project)
    if relative is not None:
        where = _in_project(relative)
        return [f"sys.path.insert(0, {where})  # {build.module} imports from there"], True
    return [
        f"# {build.module} is imported from a folder outside the one the run was started in:",
        f"sys.path.insert(0, {literal(build.pythonpath)})",
    ], False


_JS_FILE = re.compile(r"(?P<file>.*\.(?:mjs|cjs|js))(?P<export>:[A-Za-z_$][\w$.]*)?", re.DOTALL)
"""A JavaScript TARGET: its file, and ``:Export`` (as the Node harness splits it)."""


def _target_file(repro: Reproduction, project: str) -> list[str]:
    """``TARGET`` when it names a file in the run's folder (``./manager.mjs:Window``,
    ``./my-manager.py:Window``): the file found from ``PROJECT``. Empty otherwise (the TARGET
    string is written as it is)."""
    target = repro.target
    if repro.build is not None or repro.implementation or not target:
        return []
    if target.startswith(("js:", "ep:", "grpc://")):
        return []
    javascript = _JS_FILE.fullmatch(target)
    if javascript is not None:
        file, rest = javascript["file"], javascript["export"] or ""
    else:
        file, colon, attr = target.partition(":")
        if not file.endswith(".py"):
            return []
        rest = colon + attr
    relative = _within(file, project)
    if relative is None or relative == ".":
        return []
    return [f"TARGET = {_in_project(relative)}{f' + {literal(rest)}' if rest else ''}"]


def _constants(repro: Reproduction, target: list[str]) -> list[str]:
    """``CONFIG``; with no import form, ``TARGET`` (``target``: found from ``PROJECT``) and
    what opens it (``COMMAND``, ``FORM``)."""
    if repro.build is not None:
        return [f"CONFIG = {literal(dict(repro.config))}"]
    return [
        *(target or [f"TARGET = {literal(repro.target)}"]),
        f"CONFIG = {literal(dict(repro.config))}",
        *([f"COMMAND = {literal(repro.implementation)}"] if repro.implementation else []),
        *([f"FORM = {literal(repro.form)}"] if repro.form else []),
    ]


def render_steps(repro: Reproduction) -> list[str]:
    """The body of ``reproduce()`` call by call, the failed check last: for reports."""
    body = _Body(repro)
    steps: list[str] = []
    for call in repro.calls:
        before = len(body.lines)
        body.call(call)
        steps.append("\n".join(body.lines[before:]))
    before = len(body.lines)
    body.check(repro.check)
    steps.append("\n".join(body.lines[before:]))
    return steps


class _Body:
    """The lines of ``reproduce()``, and the names of the replay API they use."""

    def __init__(self, repro: Reproduction) -> None:
        self.repro = repro
        self.lines: list[str] = []
        self.names: set[str] = set()
        self.imports: list[tuple[str, str]] = []
        """``from MODULE import NAMES`` lines beside the replay API's."""
        self.requests: list[Request] = []
        self.events = "events"
        """What the events check reads."""
        if repro.build is not None:
            self._build(repro.build)
            return
        events = repro.check.kind == "events"
        command = ", command=COMMAND" if repro.implementation else ""
        command += ", form=FORM" if repro.form else ""
        self.lines.append(
            f"manager, {'events' if events else '_events'} = "
            f"await {self.use('open_manager')}(TARGET, CONFIG{command})"
        )

    def _build(self, build: Build) -> None:
        """The manager built by import, as the run built it (see
        :meth:`ctxkit.conformance.targets.load.Target.build`)."""
        top, _, rest = build.attr.partition(".")
        name = top if top not in _TAKEN else f"target_{top}"
        self.imports.append((build.module, top if name == top else f"{top} as {name}"))
        obj = f"{name}.{rest}" if rest else name
        awaited = "await " if build.awaits else ""
        hooks = ""
        if build.hooks:
            self.lines.append(f"hooks = {self.use('EventRecorder')}()")
            self.events, hooks = "hooks.events", ", hooks=hooks"
        if build.kind == "mount":
            events = "events" if self.repro.check.kind == "events" else "_events"
            self.lines.append(f"manager, {events} = await {self.use('mounted')}({obj}, CONFIG)")
        elif build.kind == "function":
            self.imports += [("ctxkit.forms", "FunctionManager")]
            self.imports += [("ctxkit.messages", "inspect_message")]
            self.lines.append(
                f"manager = FunctionManager({obj}, options=CONFIG, validate=inspect_message{hooks})"
            )
        elif build.kind.removesuffix("_object") in _WRAPPERS:
            wrapper = _WRAPPERS[build.kind.removesuffix("_object")]
            self.imports.append(("ctxkit.forms", wrapper))
            whole = build.kind.endswith("_object")  # one long-lived object, not a factory
            self.lines.append(
                f"manager = {wrapper}({obj if whole else f'{awaited}{obj}(**CONFIG{hooks})'})"
            )
            if whole:
                self.lines.append("await manager.clear()  # one long-lived object: start empty")
        else:
            self.lines.append(f"manager = {awaited}{obj}(**CONFIG{hooks})")

    def use(self, name: str) -> str:
        self.names.add(name)
        return name

    def add(self, line: str) -> None:
        self.lines.extend(line.split("\n"))

    def awaited(self, call: Call, expression: str) -> str:
        """``await`` of a call on the manager, guarded as the run found it."""
        if call.timeout is not None:
            what = expression.split("(", 1)[0].removeprefix("manager.")
            expression = f"{self.use('returns_within')}({call.timeout:g}, {expression}, {what!r})"
        elif call.tolerated:
            expression = f"{self.use('may_refuse')}({expression})"
        return f"await {expression}"

    def value(self, value: Any, before: str) -> str:
        """A literal for the body, written after ``before`` on its line."""
        return literal(value, 0, 4 + len(before))

    def call(self, call: Call) -> None:
        op = call.op
        if op in ("add", "set"):
            self.send(call, "add_message" if op == "add" else "set_messages")
        elif op in ("add_then_edit", "set_then_edit"):
            method = "add_message" if op == "add_then_edit" else "set_messages"
            name = "message" if op == "add_then_edit" else "messages"
            self.add(f"{name} = {self.value(call.value, name + ' = ')}")
            if self.repro.remote:
                self.add(self.awaited(call, f"manager.{method}({name}, edit_after=True)"))
                self.add("# the caller reused what it passed: edited in the target's process")
            else:
                self.add(self.awaited(call, f"manager.{method}({name})"))
                self.add(f"{self.use('edit_in_place')}({name})  # the caller reuses what it passed")
        elif op == "add_concurrently" and self.repro.remote:
            head = "await manager.add_concurrently("
            self.add(f"{head}{self.value(call.value, head)})")
        elif op == "add_concurrently":
            head = f"await {self.use('add_concurrently')}(manager, "
            self.add(f"{head}{self.value(call.value, head)})")
        elif op == "add_bad":
            self.add(
                f"await {self.use('check')}.refuses(manager.add_message("
                f"{self.value(call.value, 'await check.refuses(manager.add_message(')}), "
                f"{literal(call.note)})"
            )
        elif op in ("request", "request_then_edit"):
            request: Request = call.value
            self.requests.append(request)
            arguments = self._request_args(request)
            edits = op == "request_then_edit"
            if edits and self.repro.remote:
                arguments += ", edit_after=True" if arguments else "edit_after=True"
            expression = f"manager.get_messages_for_request({arguments})"
            self.add(f"{call.name} = {self.awaited(call, expression)}")
            if edits:
                self.edited(call.name, "the caller edits its view")
        elif op == "get_then_edit":
            arguments = "edit_after=True" if self.repro.remote else ""
            self.add(f"stored = {self.awaited(call, f'manager.get_messages({arguments})')}")
            self.edited("stored", "the caller edits what it got")
        elif op == "clear":
            self.add(self.awaited(call, "manager.clear()"))
        else:  # pragma: no cover - every op is rendered above
            raise ValueError(f"no rendering for op {op!r}")

    def edited(self, name: str, why: str) -> None:
        """The caller's edit of ``name``: here, or (remote) already made in the target's
        process by ``edit_after=True``."""
        if self.repro.remote:
            self.add(f"# {why}: edited in the target's process")
        else:
            self.add(f"{self.use('edit_in_place')}({name})  # {why}")

    def send(self, call: Call, method: str) -> None:
        """``await manager.<method>(<the call's value>)``, guarded as the run found it."""
        head = f"await manager.{method}("
        self.add(self.awaited(call, f"manager.{method}({self.value(call.value, head)})"))

    def _request_args(self, request: Request) -> str:
        if request.defaults is not None:
            return f"provider={self.use('Provider')}({literal(request.defaults)})"
        if request.token_budget is not None:
            return f"token_budget={request.token_budget}"
        return ""

    def check(self, check: Check) -> None:
        kind, args = check.kind, check.args
        check_name = (
            self.use("check") if kind not in ("raises", "returns", "refuses", "crashes") else ""
        )
        extra = self._options(args)
        if kind in ("raises", "returns", "refuses", "crashes"):
            self.add(
                "# the call above is the failure: it "
                + {
                    "raises": "raises on valid input",
                    "returns": "does not return in time",
                    "refuses": "must refuse the bad message",
                    "crashes": "ends the process",
                }[kind]
            )
        elif kind in ("is_list", "tool_pairs", "empty_view"):
            self.add(f"{check_name}.{kind}(view)")
        elif kind in ("ordering", "preserved"):
            self.add(f"history = {self.value(args['history'], 'history = ')}")
            self.add(f"{check_name}.{kind}(view, history{extra})")
        elif kind == "attachments":
            self.add(f"history = {self.value(args['history'], 'history = ')}")
            self.add(f"{check_name}.attachments(view, history)")
        elif kind == "fits":
            self.add(f"{check_name}.fits(view, {args['budget']}{extra})")
        elif kind == "history":
            property_id = args.get("property", "non_destructive")
            self.add(f"expected = {self.value(args['expected'], 'expected = ')}")
            self.add(
                f"{check_name}.history(await manager.get_messages(), expected, "
                f"{literal(property_id)}{extra})"
            )
        elif kind == "stored_all":
            self.add(f"before = {self.value(args['before'], 'before = ')}")
            self.add(f"added = {self.value(args['added'], 'added = ')}")
            self.add(f"{check_name}.stored_all(await manager.get_messages(), before, added{extra})")
        elif kind in ("same_view", "not_edited"):
            first = "view, " if kind == "same_view" else ""
            self.add(f"{check_name}.{kind}({first}again)")
        elif kind == "events":
            self.add(f"{check_name}.events({self.events})")
        else:  # pragma: no cover - every kind is rendered above
            raise ValueError(f"no rendering for check {kind!r}")

    def _options(self, args: Mapping[str, Any]) -> str:
        """``allow=[...]`` and ``ignore=[...]`` where they differ from the defaults."""
        found = ""
        allow = args.get("allow")
        if isinstance(allow, Relaxations) and allow.items:
            found += f", allow={literal(allow.items)}"
        if self.repro.ignore != ANNOTATION_KEYS and "ignore" not in args:
            found += f", ignore={literal(sorted(self.repro.ignore))}"
        return found
