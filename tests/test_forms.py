"""Targets in every form (issue 21, item 3): a function over the message list and an Agents SDK
session are checked, instrumented and reproduced like any context manager; detection keeps
every existing kind of target as it was; --form overrides it, and a form that does not fit is
exit 2 with a sentence."""

from __future__ import annotations

import asyncio
import copy
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxkit.conformance.replay import Provider, open_manager
from ctxkit.conformance.runner import RunOptions, run
from ctxkit.conformance.targets.load import EventRecorder, LoadError, load_target
from ctxkit.forms import (
    EVERYTHING,
    FunctionManager,
    SessionManager,
    as_manager,
    detect_form,
    session_limit,
)
from ctxkit.telemetry import instrument
from tests.processes import PLUGIN_PYTEST, ctxkit
from tests.system import require_binary
from tests.zoo.forms import LimitSession, UnitSession, keep_last_units

ROOT = Path(__file__).resolve().parent.parent
WORKER = f"{sys.executable} -m ctxkit.conformance.worker"
JS = "tests/zoo_js/forms.mjs"
SHORT = {"profile": "quick", "seed": 7, "max_examples": 8, "shrink_seconds": 3.0}
FORMS_TEXT = "the forms are contract"


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def tool_round(n: int) -> list[dict[str, Any]]:
    call = {"id": f"call_{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{n}", "content": f"out {n}"},
    ]


HISTORY = [
    {"role": "system", "content": "be brief"},
    user("first"),
    *tool_round(1),
    user("second"),
    *tool_round(2),
    *tool_round(3),
]


# -- detection: every existing kind stays as it was -----------------------------------------------

SESSION_MODULE = """
from tests.zoo.forms import LimitSession

store = LimitSession(limit=None)

def make_store():
    return LimitSession(limit=2)

def make(max_tokens):
    from tests.zoo.base import GoodManager
    return GoodManager(max_tokens=max_tokens)

def trim(history, keep=3):
    return history[-keep:]

def takes_two(first, second):
    return first
"""


@pytest.fixture
def module(tmp_path: Path) -> Path:
    path = tmp_path / "forms_target.py"
    path.write_text(textwrap.dedent(SESSION_MODULE))
    return path


@pytest.mark.parametrize(
    ("spec", "config", "kind"),
    [
        (None, {}, "mount"),
        ("ctxkit.reference", {}, "mount"),
        ("ctxkit.reference:mount", {}, "mount"),
        ("ctxkit.reference:ReferenceContextManager", {"max_tokens": 5000}, "factory"),
        ("ep:ctxkit-reference", {}, "mount"),
        ("tests.zoo.base:GoodManager", {"max_tokens": 5000}, "factory"),
        ("tests/zoo/base.py:GoodManager", {}, "factory"),
        ("tests.zoo.amplifier:mount", {}, "mount"),
        ("tests.zoo.forms:keep_last_units", {}, "function"),
        ("tests.zoo.forms:fit_budget", {}, "function"),
        ("tests/zoo/forms.py:edits_in_place", {}, "function"),
        ("tests.zoo.forms:LimitSession", {"limit": 3}, "session"),
        ("tests.zoo.forms:UnitSession", {}, "session"),
    ],
)
def test_each_target_resolves_to_its_kind(spec, config, kind):
    target = load_target(spec, config)
    assert target.kind == kind
    assert target.form == {"factory": "contract", "mount": "contract"}.get(kind, kind)


def test_an_adapter_is_still_a_contract_target():
    pytest.importorskip("langchain_core")
    assert load_target("langchain:trim_messages").kind == "factory"


def test_a_grpc_target_is_still_a_contract_target():
    pytest.importorskip("grpc")
    pytest.importorskip("amplifier_core")
    assert load_target("grpc://127.0.0.1:1").kind == "factory"
    with pytest.raises(LoadError, match="--form contract"):
        load_target("grpc://127.0.0.1:1", form="function")


def test_module_attributes_in_each_form(module: Path):
    assert load_target(f"{module}:store").kind == "session"  # an object
    assert load_target(f"{module}:make_store").kind == "factory"  # a session, once built
    assert load_target(f"{module}:make", {"max_tokens": 900}).kind == "factory"
    assert load_target(f"{module}:make").kind == "function"  # one required parameter
    assert load_target(f"{module}:trim", {"keep": 2}).kind == "function"
    assert load_target(f"{module}:takes_two").kind == "factory"  # two: not a view function


def test_detect_form_on_objects():
    assert detect_form(keep_last_units) == "function"
    assert detect_form(lambda x: x) == "function"
    assert detect_form(lambda messages, token_budget=None: messages) == "function"
    assert detect_form(LimitSession()) == "session"
    assert detect_form(LimitSession) == "session"
    assert detect_form(FunctionManager(keep_last_units)) == "contract"
    assert detect_form(lambda coordinator: None) == "contract"
    assert detect_form(lambda: None) == "contract"  # a zero-argument factory

    async def mount(coordinator, config=None):
        return None

    assert detect_form(mount) == "contract"
    assert isinstance(as_manager(keep_last_units), FunctionManager)
    assert isinstance(as_manager(LimitSession()), SessionManager)
    contract = FunctionManager(keep_last_units)
    assert as_manager(contract) is contract
    with pytest.raises(ValueError, match="form must be one of"):
        as_manager(contract, "manager")  # type: ignore[arg-type]


def test_build_wraps_each_form_and_a_session_object_starts_empty(module: Path):
    async def scenario() -> None:
        function = await load_target("tests.zoo.forms:keep_last_units").build(EventRecorder())
        assert isinstance(function, FunctionManager)
        made = await load_target(f"{module}:make_store").build(EventRecorder())
        assert isinstance(made, SessionManager)
        assert made.limit == 2
        target = load_target(f"{module}:store")
        first = await target.build(EventRecorder())
        await first.add_message(user("left over"))
        second = await target.build(EventRecorder())
        assert await second.get_messages() == []

    asyncio.run(scenario())


# -- --form, and the errors of a form that does not fit -------------------------------------------


@pytest.mark.parametrize(
    ("spec", "form", "fragment"),
    [
        ("tests.zoo.forms:keep_last_units", "session", "--form session, but it is a function"),
        ("tests.zoo.base:GoodManager", "function", "--form function, but it is the class"),
        ("tests.zoo.base:GoodManager", "session", "--form session, but it is the class"),
        ("tests.zoo.forms:LimitSession", "contract", "--form contract, but it is a session"),
        ("tests.zoo.forms:LimitSession", "function", "--form function, but it is a session"),
    ],
)
def test_a_form_that_does_not_fit_is_a_load_error_that_names_the_forms(spec, form, fragment):
    with pytest.raises(LoadError) as raised:
        load_target(spec, {}, form)
    assert fragment in str(raised.value)
    assert FORMS_TEXT in str(raised.value)


def test_form_overrides_detection(module: Path):
    assert load_target(f"{module}:make_store", form="session").kind == "session"
    assert load_target("tests.zoo.forms:keep_last_units", form="contract").kind == "factory"

    async def build_wrong() -> None:
        await load_target(f"{module}:make", {"max_tokens": 9}, "session").build(EventRecorder())

    with pytest.raises(LoadError, match="--form session, but it built a context manager"):
        asyncio.run(build_wrong())


def test_the_cli_refuses_a_wrong_form_with_exit_2_and_a_sentence():
    done = ctxkit("conformance", "tests.zoo.forms:keep_last_units", "--form", "session")
    assert done.returncode == 2, done.stderr
    assert "--form session, but it is a function keep_last_units(messages" in done.stderr
    assert FORMS_TEXT in done.stderr
    assert "Traceback" not in done.stderr
    unknown = ctxkit("conformance", "tests.zoo.forms:keep_last_units", "--form", "closure")
    assert unknown.returncode == 2
    assert "invalid choice: 'closure'" in unknown.stderr


def test_config_keys_a_function_does_not_take_are_refused():
    done = ctxkit("conformance", "tests.zoo.forms:keep_last_units", "--config", '{"n": 3}')
    assert done.returncode == 2, done.stderr
    assert "the function takes no keyword 'n'" in done.stderr
    assert "--config keys are passed to it as keywords" in done.stderr
    with pytest.raises(LoadError, match="takes no keyword 'token_budget'"):
        load_target("tests.zoo.forms:fit_budget", {"token_budget": 5})


def test_the_plugin_takes_a_form_from_its_option(tmp_path: Path):
    import os
    import subprocess

    done = subprocess.run(
        [*PLUGIN_PYTEST, "--pyargs",
         "ctxkit.conformance.suite", "--ctxkit-target", "tests.zoo.forms:keep_last_units",
         "--ctxkit-form", "session", "-q"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(ROOT)), check=False,
    )  # fmt: skip
    assert "--form session, but it is a function keep_last_units" in done.stdout, done.stdout
    assert done.returncode == 1


def test_a_forced_form_over_command_is_checked_and_reproduced_with_it():
    report = run(
        RunOptions(
            target="tests.zoo.forms:keep_last_messages",
            implementation=WORKER,
            form="function",
            **SHORT,
        )
    )
    pairs = next(p for p in report.properties if p.id == "tool_pair_integrity")
    assert pairs.status == "failed"
    assert 'FORM = "function"' in pairs.reproducer
    assert "open_manager(TARGET, CONFIG, command=COMMAND, form=FORM)" in pairs.reproducer
    assert pairs.verified, pairs.verification
    assert "--form function" in pairs.reproducer  # the command line that found it


# -- the function form ----------------------------------------------------------------------------


def run_async(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_a_function_that_edits_its_argument_cannot_change_stored_history():
    def vandal(messages):
        for message in messages:
            message["content"] = "EDITED"
        messages.clear()
        messages.append(user("only me"))
        return messages

    async def scenario() -> None:
        manager = FunctionManager(vandal)
        for message in HISTORY:
            await manager.add_message(message)
        assert await manager.get_messages_for_request() == [user("only me")]
        assert await manager.get_messages() == HISTORY
        returned = await manager.get_messages()
        returned[0]["content"] = "changed by the caller"
        assert await manager.get_messages() == HISTORY

    run_async(scenario())


@settings(max_examples=60, deadline=None)
@given(
    picks=st.lists(st.booleans(), max_size=len(HISTORY)),
    count=st.integers(min_value=0, max_value=len(HISTORY)),
    reset=st.integers(min_value=0, max_value=len(HISTORY)),
)
def test_get_messages_is_always_everything_added_whatever_sublist_the_function_returns(
    picks, count, reset
):
    """For any history and any function returning a sublist of (and scribbling over) its
    argument, the view is that sublist and get_messages() everything added, in order."""

    def sublist(messages):
        chosen = [m for m, keep in zip(messages, picks, strict=False) if keep]
        for message in messages:
            message["scribbled"] = True
        return copy.deepcopy([{k: v for k, v in m.items() if k != "scribbled"} for m in chosen])

    async def scenario() -> None:
        manager = FunctionManager(sublist)
        await manager.set_messages(HISTORY[:reset])
        await manager.clear()
        for message in HISTORY[:count]:
            await manager.add_message(message)
            view = await manager.get_messages_for_request(token_budget=100)
            added = HISTORY[: HISTORY.index(message) + 1]
            assert view == [m for m, keep in zip(added, picks, strict=False) if keep]
            assert await manager.get_messages() == added

    run_async(scenario())


def test_the_budget_reaches_a_function_that_takes_it():
    seen: list[dict[str, Any]] = []

    def with_budget(messages, token_budget=777):
        seen.append({"token_budget": token_budget})
        return messages

    def with_kwargs(messages, **kwargs):
        seen.append(kwargs)
        return messages

    def without(messages):
        seen.append({})
        return messages

    async def scenario() -> None:
        provider = Provider(
            {"context_window": 10_000, "max_output_tokens": 1_000, "safety_margin": 500}
        )
        for function in (with_budget, with_kwargs):
            manager = FunctionManager(function)
            await manager.get_messages_for_request(token_budget=123)
            await manager.get_messages_for_request(provider=provider)
            await manager.get_messages_for_request(token_budget=50, provider=provider)
            await manager.get_messages_for_request()
        await FunctionManager(without).get_messages_for_request(token_budget=5, provider=provider)

    run_async(scenario())
    assert seen == [
        {"token_budget": 123},
        {"token_budget": 8_500},  # context_window - max_output_tokens - safety_margin
        {"token_budget": 50},  # a request's budget wins over the provider's
        {"token_budget": 777},  # neither: the function's own default holds
        {"token_budget": 123},
        {"token_budget": 8_500},
        {"token_budget": 50},
        {},
        {},
    ]


def test_an_async_function_with_options_is_awaited_and_a_non_list_is_a_clear_error():
    async def trim(messages, keep=1, token_budget=None):
        await asyncio.sleep(0)
        return messages[-keep:]

    def count(messages):
        return len(messages)

    async def scenario() -> None:
        manager = FunctionManager(trim, options={"keep": 2})
        for message in HISTORY:
            await manager.add_message(message)
        assert await manager.get_messages_for_request(token_budget=10) == HISTORY[-2:]
        broken = FunctionManager(count)
        with pytest.raises(TypeError, match="returned int, not a list"):
            await broken.get_messages_for_request()

    run_async(scenario())
    with pytest.raises(TypeError, match="takes no keyword 'n'"):
        FunctionManager(trim, options={"n": 2})


def test_a_pydantic_ai_history_processor_keeps_its_own_message_objects():
    messages = pytest.importorskip("pydantic_ai.messages")

    def keep_recent(history: list[Any]) -> list[Any]:  # pydantic-ai's documented example
        return history[-2:]

    async def scenario() -> None:
        manager = FunctionManager(keep_recent)
        for text in ("one", "two", "three"):
            await manager.add_message(
                messages.ModelRequest(parts=[messages.UserPromptPart(content=text)])
            )
        view = await manager.get_messages_for_request()
        assert [m.parts[0].content for m in view] == ["two", "three"]
        assert len(await manager.get_messages()) == 3

    run_async(scenario())


# -- the session form -----------------------------------------------------------------------------


def test_a_real_sqlite_session_is_read_as_runner_reads_it(tmp_path: Path):
    agents = pytest.importorskip("agents")
    from agents.memory.session_settings import SessionSettings
    from agents.run_internal.session_persistence import prepare_input_with_session

    async def runner_history(session: Any, run_settings: Any = None) -> list[Any]:
        prepared, _ = await prepare_input_with_session("next question", session, None, run_settings)
        assert prepared[-1] == {"role": "user", "content": "next question"}
        return prepared[:-1]

    async def scenario() -> None:
        session = agents.SQLiteSession(
            "conformance", tmp_path / "sessions.db", session_settings=SessionSettings(limit=3)
        )
        manager = SessionManager(session)
        assert manager.limit == 3
        for message in HISTORY:
            await manager.add_message(message)
        view = await manager.get_messages_for_request(token_budget=10)
        assert view == await runner_history(session)
        assert view == HISTORY[-3:]  # view[0] is a tool result without its call (#4322)
        assert view[0]["role"] == "tool"
        assert await manager.get_messages() == HISTORY  # every item, despite the limit
        overridden = SessionManager(session, run_settings=SessionSettings(limit=5))
        assert await overridden.get_messages_for_request() == await runner_history(
            session, SessionSettings(limit=5)
        )
        await manager.set_messages(HISTORY[:2])
        assert await manager.get_messages() == HISTORY[:2]
        await manager.clear()
        assert await manager.get_messages() == []
        await manager.close()

        unlimited = SessionManager(agents.SQLiteSession("open", tmp_path / "sessions.db"))
        assert unlimited.limit is None
        for message in HISTORY:
            await unlimited.add_message(message)
        assert await unlimited.get_messages_for_request() == await runner_history(unlimited.session)
        assert await unlimited.get_messages_for_request() == HISTORY
        await unlimited.close()

    run_async(scenario())


def test_the_session_limit_is_resolved_as_the_sdk_resolves_it():
    assert session_limit(LimitSession(limit=4)) == 4
    assert session_limit(LimitSession(limit=None)) is None
    assert session_limit(LimitSession(limit=4), {"limit": 9}) == 9
    assert session_limit(LimitSession(limit=4), {"limit": None}) == 4
    assert session_limit(object()) is None
    assert EVERYTHING == 2**63 - 1  # SQLite's largest integer

    async def scenario() -> None:
        manager = SessionManager(UnitSession(limit=3))
        for message in HISTORY:
            await manager.add_message(message)
        assert await manager.get_messages_for_request() == HISTORY[-2:]  # one whole unit
        assert await manager.get_messages() == HISTORY

    run_async(scenario())
    with pytest.raises(TypeError, match="lacks add_items, get_items, pop_item, clear_session"):
        SessionManager(object())


# -- instrument() ---------------------------------------------------------------------------------


def test_instrument_wraps_a_function_and_checks_its_views():
    async def scenario() -> tuple[Any, Any]:
        good = instrument(keep_last_units, check_invariants=True)
        bad = instrument(lambda messages: messages[-3:], check_invariants=True)
        for manager in (good, bad):
            for message in HISTORY:
                await manager.add_message(message)
            await manager.get_messages_for_request(token_budget=1_000)
            assert await manager.get_messages() == HISTORY
        return good, bad

    good, bad = run_async(scenario())
    assert isinstance(good.manager, FunctionManager)
    assert good.manager.function is keep_last_units
    assert good.violations == 0
    assert bad.violations >= 1  # the newest 3 messages begin with a tool result


def test_instrument_wraps_a_session():
    async def scenario() -> Any:
        manager = instrument(LimitSession(limit=3), check_invariants=["tool_pair_integrity"])
        for message in HISTORY:
            await manager.add_message(message)
        await manager.get_messages_for_request()
        return manager

    manager = run_async(scenario())
    assert isinstance(manager.manager, SessionManager)
    assert manager.violations == 1


# -- the Node harness -----------------------------------------------------------------------------


@pytest.fixture
def node() -> str:
    return require_binary("node")


def test_a_javascript_function_is_the_function_form(node):
    async def scenario() -> None:
        manager, _ = await open_manager(f"{JS}:echoOptions", {"keep": 2})
        await manager.add_message(user("hi"))
        by_budget = await manager.get_messages_for_request(token_budget=50)
        assert by_budget == [user('{"keep":2,"tokenBudget":50}')]
        provider = Provider({"context_window": 1000, "max_output_tokens": 100})
        by_provider = await manager.get_messages_for_request(provider=provider)
        assert by_provider == [user('{"keep":2,"tokenBudget":900}')]
        assert await manager.get_messages() == [user("hi")]
        vandal, _ = await open_manager(f"{JS}:emptiesItsArgument")
        await vandal.add_message(user("kept"))
        assert await vandal.get_messages_for_request() == []
        assert await vandal.get_messages() == [user("kept")]
        factory, _ = await open_manager(f"{JS}:makeKeepAll")  # (config, hooks): a factory
        await factory.add_message(user("hi"))
        assert await factory.get_messages_for_request() == [user("hi")]

    run_async(scenario())


def test_javascript_functions_are_judged_and_reproduced(node):
    keep_all = run(RunOptions(target=f"{JS}:keepAll", max_tokens=20_000, **SHORT))
    # every required property holds, but a function that keeps everything never compacts
    assert keep_all.verdict == "inconclusive", [(p.id, p.message) for p in keep_all.properties]
    assert not [p for p in keep_all.properties if p.level == "required" and p.status != "passed"]
    last_five = run(RunOptions(target=f"{JS}:lastFive", **SHORT))
    pairs = next(p for p in last_five.properties if p.id == "tool_pair_integrity")
    assert pairs.status == "failed"
    assert pairs.verified, pairs.verification


def test_a_javascript_target_refuses_a_form_it_cannot_take(node):
    done = ctxkit("conformance", f"{JS}:keepAll", "--form", "session")
    assert done.returncode == 2, done.stderr
    assert "--form session: the Node harness takes the forms contract" in done.stderr
    assert "a session is a Python form" in done.stderr
    returns = run(RunOptions(target=f"{JS}:returnsCount", **SHORT))
    assert "returned number, not an array" in " ".join(p.message for p in returns.properties)


def test_a_function_that_cuts_its_own_argument_passes_non_destructive():
    """The zoo's edits_in_place cuts and drops in the list it is given: harmless, because that
    list is a copy. Its zoo run (shared with tests/test_conformance_zoo.py) says so."""
    from tests.test_conformance_zoo import check
    from tests.zoo import ZOO

    (member,) = [m for m in ZOO if m.target.endswith(":edits_in_place")]
    outcome = check(member)
    assert outcome["properties"]["non_destructive"].status == "passed"
    assert outcome["verdict"] == "pass"
