"""The coordinator a mounted target sees: amplifier-core's real one when installed, the stand-in
otherwise. Each behaviour a module can rely on is checked on both, so the stand-in is held to
what the real one does; every event reaches ctxkit, in order, custom names included."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ctxkit.conformance.targets import coordinator as coordinators
from ctxkit.conformance.targets.coordinator import (
    ENV,
    CoordinatorUnavailable,
    StandInCoordinator,
    StandInHooks,
    coordinator_kind,
    make_coordinator,
)
from ctxkit.conformance.targets.load import (
    ContractError,
    EventRecorder,
    LoadError,
    Target,
    load_target,
)
from tests.system import missing
from tests.test_conformance_cli import FAST, ROOT, conformance
from tests.zoo.amplifier import BUDGET, LLM_RESPONSE, METER, OWN_EVENT, READY

HAS_AMPLIFIER = importlib.util.find_spec("amplifier_core") is not None
AMPLIFIER_SPEC = "tests.zoo.amplifier:mount"
OWN_EVENT_SPEC = "tests.zoo.amplifier:mount_own_event"
PRE, POST = "context:pre_compact", "context:post_compact"


def require_amplifier() -> None:
    """Skip without amplifier-core, or fail when ``CI=true`` (the dev extra installs it)."""
    if HAS_AMPLIFIER:
        return
    missing("amplifier-core is not installed (pip install 'ctxkit-llm[amplifier]')")


@pytest.fixture(params=["stand-in", "amplifier"])
def kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each coordinator in turn, also as ``$CTXKIT_COORDINATOR`` for targets built in the test."""
    if request.param == "amplifier":
        require_amplifier()
    monkeypatch.setenv(ENV, request.param)
    return request.param


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def fresh(kind: str) -> tuple[Any, EventRecorder]:
    recorder = EventRecorder()
    return make_coordinator(recorder, kind=kind), recorder  # type: ignore[arg-type]


def recording(seen: list[Any], label: str, returns: Any = None) -> Callable[..., Any]:
    async def handler(event: str, data: Any) -> Any:
        seen.append((label, event, data))
        return returns

    return handler


# -- which coordinator -----------------------------------------------------------------------------


def test_with_amplifier_core_installed_mounts_get_its_real_coordinator(monkeypatch):
    require_amplifier()
    import amplifier_core

    monkeypatch.delenv(ENV, raising=False)
    assert coordinator_kind() == "amplifier"
    target = load_target(AMPLIFIER_SPEC)
    manager = run(target.build(EventRecorder()))
    coordinator = target._mounted[id(manager)][1]
    assert isinstance(coordinator, amplifier_core.ModuleCoordinator)
    assert isinstance(manager.hooks.registry, amplifier_core.HookRegistry)
    assert coordinator.mount_points["hooks"] is manager.hooks.registry
    assert coordinator.get("context") is manager


def test_the_environment_variable_forces_the_stand_in(monkeypatch):
    monkeypatch.setenv(ENV, "stand-in")
    assert coordinator_kind() == "stand-in"
    target = load_target(AMPLIFIER_SPEC)
    manager = run(target.build(EventRecorder()))
    assert isinstance(target._mounted[id(manager)][1], StandInCoordinator)
    assert isinstance(manager.hooks.registry, StandInHooks)


def test_without_amplifier_core_auto_is_the_stand_in_and_asking_for_it_says_the_fix(monkeypatch):
    def missing() -> type:
        raise ModuleNotFoundError("No module named 'amplifier_core'")

    monkeypatch.setattr(coordinators, "_amplifier_coordinator_class", missing)
    assert coordinator_kind("auto") == "stand-in"
    with pytest.raises(CoordinatorUnavailable, match=r"pip install 'ctxkit-llm\[amplifier\]'"):
        coordinator_kind("amplifier")
    monkeypatch.setenv(ENV, "amplifier")
    with pytest.raises(LoadError, match=r"pip install 'ctxkit-llm\[amplifier\]'"):
        load_target(AMPLIFIER_SPEC)


def test_a_broken_amplifier_core_is_said_not_quietly_replaced_by_the_stand_in(monkeypatch):
    def broken() -> type:
        raise RuntimeError("pydantic models failed to build")

    monkeypatch.setattr(coordinators, "_amplifier_coordinator_class", broken)
    with pytest.raises(CoordinatorUnavailable, match=f"set {ENV}=stand-in"):
        coordinator_kind("auto")


def test_an_unknown_choice_is_a_load_error_for_mount_targets_only(monkeypatch):
    monkeypatch.setenv(ENV, "rust")
    with pytest.raises(LoadError, match="use amplifier, stand-in or auto"):
        load_target(AMPLIFIER_SPEC)
    assert load_target("tests.zoo.base:GoodManager").kind == "factory"


# -- hooks: the same on both -----------------------------------------------------------------------


def test_handlers_run_lowest_priority_first_and_register_returns_an_unregister(kind):
    async def scenario() -> None:
        coordinator, _ = fresh(kind)
        seen: list[Any] = []
        for label, priority in (("late", 20), ("first", 0), ("tie-a", 5), ("tie-b", 5)):
            unregister = coordinator.hooks.register(
                "zoo:order", recording(seen, label), priority=priority, name=label
            )
        await coordinator.hooks.emit("zoo:order", {})
        assert [label for label, _, _ in seen] == ["first", "tie-a", "tie-b", "late"]
        unregister()  # the last one registered: "tie-b"
        seen.clear()
        await coordinator.hooks.emit("zoo:order", {})
        assert [label for label, _, _ in seen] == ["first", "tie-a", "late"]
        coordinator.hooks.unregister("late")
        assert coordinator.hooks.list_handlers("zoo:order") == {"zoo:order": ["first", "tie-a"]}

    run(scenario())


def test_a_handler_that_raises_is_skipped_and_the_chain_goes_on(kind):
    async def scenario() -> None:
        coordinator, _ = fresh(kind)
        seen: list[Any] = []

        async def boom(event: str, data: Any) -> None:
            raise RuntimeError("handler failed")

        coordinator.hooks.register("zoo:boom", boom, priority=0, name="boom")
        coordinator.hooks.register("zoo:boom", recording(seen, "after"), priority=1, name="after")
        result = await coordinator.hooks.emit("zoo:boom", {"k": 1})
        assert result.action == "continue"
        assert [label for label, _, _ in seen] == ["after"]

    run(scenario())


def test_handlers_get_a_copy_and_deny_stops_the_chain_and_modify_passes_data_on(kind):
    async def scenario() -> None:
        coordinator, _ = fresh(kind)
        seen: list[Any] = []

        async def scribble(event: str, data: Any) -> Any:
            data["k"] = "scribbled"
            return {"action": "modify", "data": {"k": "modified"}}

        hooks = coordinator.hooks
        hooks.register("zoo:chain", scribble, priority=0, name="scribble")
        hooks.register("zoo:chain", recording(seen, "second"), priority=1, name="second")
        deny = {"action": "deny", "reason": "no"}
        hooks.register("zoo:chain", recording(seen, "deny", deny), priority=2, name="deny")
        hooks.register("zoo:chain", recording(seen, "never"), priority=3, name="never")
        given = {"k": "original"}
        result = await hooks.emit("zoo:chain", given)
        assert given == {"k": "original"}
        assert [label for label, _, _ in seen] == ["second", "deny"]
        assert seen[0][2]["k"] == "modified"
        assert (result.action, result.reason) == ("deny", "no")

    run(scenario())


def test_emit_and_collect_gathers_what_handlers_return(kind):
    async def scenario() -> None:
        coordinator, recorder = fresh(kind)
        hooks = coordinator.hooks
        hooks.register("zoo:ask", recording([], "a", {"data": {"v": 1}}), name="a")
        hooks.register("zoo:ask", recording([], "b"), name="b")
        assert await hooks.emit_and_collect("zoo:ask", {}) == [{"v": 1}]
        assert [name for name, _ in recorder.events] == ["zoo:ask"]

    run(scenario())


def test_every_emit_is_recorded_in_order_custom_names_and_nested_ones_too(kind):
    async def scenario() -> None:
        coordinator, recorder = fresh(kind)
        hooks = coordinator.hooks

        async def relay(event: str, data: Any) -> None:
            await hooks.emit("zoo:inner", {"from": event})

        hooks.register("zoo:outer", relay, name="relay")
        await hooks.emit(BUDGET, {"budget": 100})
        await hooks.emit("zoo:outer", {"n": 1})
        await coordinator.get("hooks").emit(PRE, {"message_count": 2, "token_count": 9})
        assert recorder.events == [
            (BUDGET, {"budget": 100}),
            ("zoo:outer", {"n": 1}),
            ("zoo:inner", {"from": "zoo:outer"}),
            (PRE, {"message_count": 2, "token_count": 9}),
        ]

    run(scenario())


# -- the rest of the coordinator: the same on both ---------------------------------------------


def test_mount_points_behave_alike(kind):
    async def scenario() -> None:
        coordinator, _ = fresh(kind)
        first, second, tool = object(), object(), object()
        await coordinator.mount("context", first)
        await coordinator.mount("context", second)
        assert coordinator.get("context") is second
        await coordinator.unmount("context")
        assert coordinator.get("context") is None
        await coordinator.mount("tools", tool, name="grep")
        assert coordinator.get("tools", name="grep") is tool
        assert coordinator.get("tools") == {"grep": tool}
        with pytest.raises(ValueError, match="Name required for tools"):
            await coordinator.mount("tools", tool)
        with pytest.raises(ValueError, match="Unknown mount point: bogus"):
            coordinator.get("bogus")
        with pytest.raises(ValueError, match="registered directly with the HookRegistry"):
            await coordinator.mount("hooks", object())
        assert coordinator.get("hooks") is coordinator.hooks

    run(scenario())


def test_capabilities_contributions_and_session_fields_behave_alike(kind):
    async def scenario() -> None:
        coordinator, _ = fresh(kind)
        coordinator.register_capability("zoo.cap", 1)
        coordinator.register_capability("zoo.cap", 2)
        assert coordinator.get_capability("zoo.cap") == 2
        assert coordinator.get_capability("zoo.none") is None

        async def later() -> list[str]:
            return ["b"]

        def broken() -> None:
            raise RuntimeError("contributor failed")

        for name, callback in (("a", lambda: ["a"]), ("b", later), ("x", broken), ("n", list)):
            coordinator.register_contributor("zoo:channel", name, callback)
        assert await coordinator.collect_contributions("zoo:channel") == [["a"], ["b"], []]
        assert await coordinator.collect_contributions("zoo:nothing") == []
        assert (coordinator.session_id, coordinator.parent_id) == ("ctxkit-conformance", None)
        assert coordinator.config == {}

    run(scenario())


def test_cleanups_run_newest_first_and_one_that_raises_stops_none(kind):
    async def scenario() -> None:
        coordinator, _ = fresh(kind)
        ran: list[str] = []

        async def last_registered() -> None:
            ran.append("async")

        def broken() -> None:
            raise RuntimeError("cleanup failed")

        coordinator.register_cleanup(lambda: ran.append("first"))
        coordinator.register_cleanup(broken)
        coordinator.register_cleanup(last_registered)
        await coordinator.cleanup()
        assert ran == ["async", "first"]

    run(scenario())


# -- a context-simple style module, mounted -----------------------------------------------------


async def _compact(manager: Any) -> None:
    """Enough messages for a 300-token budget to drop some: one compaction."""
    for number in range(12):
        await manager.add_message({"role": "user", "content": f"message {number} " * 10})
    await manager.get_messages_for_request()


def test_a_context_simple_style_mount_loads_registers_and_is_observed(kind):
    async def scenario() -> None:
        target = load_target(AMPLIFIER_SPEC, {"max_tokens": 300})
        recorder = EventRecorder()
        manager = await target.build(recorder)
        coordinator = target._mounted[id(manager)][1]
        assert manager.ready, "on_session_ready ran after mount()"
        assert coordinator.get_capability("context.foreground_usage") == manager.foreground_usage
        assert coordinator.hooks.list_handlers(LLM_RESPONSE) == {LLM_RESPONSE: [METER]}
        await coordinator.hooks.emit(LLM_RESPONSE, {"usage": {"input_tokens": 42}})
        assert manager.foreground_usage() == {"input_tokens": 42}
        await _compact(manager)
        names = [name for name, _ in recorder.events]
        assert names == [READY, LLM_RESPONSE, BUDGET, PRE, POST]

    run(scenario())


def test_closing_runs_the_cleanup_mount_returned_once(kind, tmp_path: Path):
    async def scenario() -> None:
        log = tmp_path / "cleanups.log"
        target = load_target(AMPLIFIER_SPEC, {"cleanup_log": str(log)})
        manager = await target.build(EventRecorder())
        await target.close(manager)
        await target.close(manager)
        assert log.read_text().splitlines() == [f"cleanup: {LLM_RESPONSE} handlers left 0"]
        assert manager.hooks.list_handlers(LLM_RESPONSE) == {LLM_RESPONSE: []}

    run(scenario())


def test_a_handler_the_module_registered_and_its_own_event_are_both_observed(kind):
    async def scenario() -> None:
        recorder = EventRecorder()
        manager = await load_target(OWN_EVENT_SPEC, {"max_tokens": 300}).build(recorder)
        await _compact(manager)
        assert [name for name, _ in recorder.events] == [READY, BUDGET, PRE, POST, OWN_EVENT]
        post, own = recorder.events[-2][1], recorder.events[-1][1]
        assert own == {"after": POST, "message_count": post["message_count"]}
        assert manager.handled == [OWN_EVENT]

    run(scenario())


MODULE = """
from tests.zoo.base import GoodManager

async def mount(coordinator, config):
    async def cleanup():
        with open({log!r}, "a") as file:
            file.write("cleaned\\n")
    {mount_line}
    return cleanup

{ready}
"""


def _module(tmp_path: Path, name: str, mount_line: str, ready: str = "") -> tuple[Target, Path]:
    log = tmp_path / "log.txt"
    path = tmp_path / f"{name}.py"
    path.write_text(MODULE.format(log=str(log), mount_line=mount_line, ready=ready))
    return load_target(str(path)), log


def test_a_failing_on_session_ready_is_reported_as_amplifier_does_and_a_sync_one_skipped(
    kind, tmp_path: Path
):
    mounts = "await coordinator.mount('context', GoodManager())"
    failing = "async def on_session_ready(coordinator):\n    raise RuntimeError('not ready')"
    target, _ = _module(tmp_path, "failing_ready", mounts, failing)
    recorder = EventRecorder()
    run(target.build(recorder))
    ((name, data),) = recorder.events
    assert name == "module:on_session_ready_failed"
    assert data["error"] == "not ready"
    sync = "def on_session_ready(coordinator):\n    raise RuntimeError('never called')"
    target, _ = _module(tmp_path, "sync_ready", mounts, sync)
    recorder = EventRecorder()
    run(target.build(recorder))
    assert recorder.events == []


def test_a_mount_that_mounts_nothing_is_a_contract_error_and_its_cleanup_still_runs(
    kind, tmp_path: Path
):
    target, log = _module(tmp_path, "mounts_nothing", "pass")
    with pytest.raises(ContractError, match="mounted nothing at 'context'"):
        run(target.build(EventRecorder()))
    assert log.read_text() == "cleaned\n"


# -- end to end ------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", [AMPLIFIER_SPEC, OWN_EVENT_SPEC])
def test_ctxkit_conformance_passes_amplifier_style_modules_and_sees_their_events(
    kind, spec, tmp_path: Path
):
    report, log = tmp_path / "report.json", tmp_path / "cleanups.log"
    config = json.dumps({"cleanup_log": str(log)})
    done = conformance(spec, *FAST, "--config", config, "--report-json", str(report))
    assert done.returncode == 0, done.stdout + done.stderr
    statuses = {p["id"]: p["status"] for p in json.loads(report.read_text())["properties"]}
    assert statuses["events"] == "passed"
    if spec == AMPLIFIER_SPEC:  # every manager the worker built was closed: one line each
        lines = log.read_text().splitlines()
        assert len(lines) > 1
        assert set(lines) == {f"cleanup: {LLM_RESPONSE} handlers left 0"}


REPRODUCER = f"""
import asyncio

from ctxkit.conformance.replay import check, open_manager


async def reproduce() -> None:
    manager, events = await open_manager({OWN_EVENT_SPEC!r}, {{"max_tokens": 300}})
    for number in range(12):
        await manager.add_message({{"role": "user", "content": f"message {{number}} " * 10}})
        await manager.get_messages_for_request()
    check.events(events)
    assert events[-1][0] == {OWN_EVENT!r}
    for _ in range(50):  # more async handler calls, more chances to abort at exit
        await manager.hooks.emit({POST!r}, {{"message_count": 1, "token_count": 1}})


if __name__ == "__main__":
    asyncio.run(reproduce())
"""


def test_scripts_that_ran_async_handlers_on_the_real_registry_exit_cleanly(tmp_path: Path):
    """Without the exit hook, this script aborted at interpreter exit (status 134 or 139) in 20
    to 30 runs of 100, two at a time (fewer under heavier load): 16 runs catch that nearly
    always."""
    require_amplifier()
    script = tmp_path / "reproduce_events.py"
    script.write_text(REPRODUCER)
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{ENV: "amplifier"})

    def once(_: int) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, str(script)]
        return subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
        )

    with ThreadPoolExecutor(2) as pool:
        done = list(pool.map(once, range(16)))
    assert [d.returncode for d in done] == [0] * len(done), [d.stderr[-400:] for d in done]
