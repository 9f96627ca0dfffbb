"""The Google ADK adapters, checked from an environment of their own (google-adk caps
OpenTelemetry at 1.44 and google-genai below 3, which dev is past): Gemini contents go into a
real ADK session and come back unchanged; the filter's view is ContextFilterPlugin's own cut of
the history's contents, after a real Runner's whole request pipeline; compaction summarizes
what ADK's runner summarizes after each invocation (finished invocations, the docs' window of
3; with a token threshold, all but the newest events, a retained result keeping its call when
ids say which); every option reaches ADK exactly as written (None included) or is refused with
a sentence naming the known ones; brief runs judge ADK's part (pairs stay whole, order kept)
and find what it is: invocations or ADK's own estimate counted, not the budget (design), an
answered question summarized (design), a system reminder passed as a user's turn (the
adapter's limit). The environment is .venvs/google-adk (made by .ci/run), or
CTXKIT_ADK_PYTHON."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxkit.adapters import by_name
from ctxkit.adapters.reports import history_before_view
from ctxkit.conformance.runner import Report, RunOptions, run
from ctxkit.conformance.search.conversations import conversations
from ctxkit.survey.subjects import subjects_in
from tests.adapter_runs import SHORT, assert_judged
from tests.processes import json_lines
from tests.system import environment_python

ROOT = Path(__file__).resolve().parent.parent
NAME = "google_adk:context_filter"
COMPACTION_NAME = "google_adk:compaction"
ADAPTER_PART = {"non_destructive", "lifecycle", "isolation", "robustness", "concurrency"}
"""The adapter's own part: ctxkit keeps the history; ADK only ever sees a copy."""
ADK_PART = {"tool_pair_integrity", "ordering", "determinism"}
"""ADK's part that holds: its cut keeps pairs whole and order, the same way every time."""


def _python() -> str:
    return environment_python("google-adk", "Google ADK", "CTXKIT_ADK_PYTHON")


@pytest.fixture(scope="module")
def python() -> str:
    return _python()


def _brief(python: str, target: str, config: dict | None = None) -> Report:
    """A brief run through the ADK environment's worker (no agent-loop measure: the findings
    are what is looked at). About 15 s on two busy cores: 30 examples through the worker,
    each failure then verified in a fresh one, which imports ADK again."""
    quick = {**SHORT, "max_examples": 30, "shrink_seconds": 1.0, "stability_steps": 0}
    return run(
        RunOptions(
            target=target,
            implementation=f"{python} -m ctxkit.conformance.worker",
            config=config or {},
            **quick,
        )
    )


# Answers each JSON line {"history", "options", "adapter"} with what the adapter stores and
# sends, and for ContextFilter what the plugin alone makes of the history's contents (its
# before_model_callback on an LlmRequest, the Contents mapped back to their history messages).
_VIEWS = """
import asyncio, json, sys, warnings
from google.adk.models.llm_request import LlmRequest
from google.adk.plugins.context_filter_plugin import ContextFilterPlugin
from google.genai import types
from ctxkit.adapters import google_adk

warnings.simplefilter("ignore")  # ADK's 'experimental' notice for EventsCompactionConfig

async def answer(case):
    history, options = case["history"], case.get("options", {})
    kind = case.get("adapter", "ContextFilter")
    try:
        adapter = getattr(google_adk, kind)(**options)
        await adapter.set_messages(history)
        stored = await adapter.get_messages()
        view = await adapter.get_messages_for_request(token_budget=case.get("budget"))
    except Exception as error:
        return {"error": f"{type(error).__name__}: {error}"}
    lead = 0
    while lead < len(history) and "parts" not in history[lead]:
        lead += 1
    if kind != "ContextFilter" or "custom_filter" in options:
        return {"stored": stored, "view": view}
    if any("parts" not in m for m in history[lead:]):
        return {"stored": stored, "view": view}  # no reminders in Gemini contents
    made = [(types.Content.model_validate(m), m) for m in history[lead:]]
    for content, _ in made:
        content.role = content.role or "user"  # the Gemini API's default
    request = LlmRequest(contents=[content for content, _ in made])
    plugin = ContextFilterPlugin(**{"num_invocations_to_keep": 3, **options})
    await plugin.before_model_callback(callback_context=None, llm_request=request)
    source = {id(content): message for content, message in made}
    alone = history[:lead] + [source[id(content)] for content in request.contents]
    return {"stored": stored, "view": view, "plugin": alone}

for line in sys.stdin:
    print(json.dumps(asyncio.run(answer(json.loads(line)))), flush=True)
"""


@pytest.fixture(scope="module")
def views(python):
    with json_lines([python, "-c", _VIEWS]) as ask:
        yield ask


def _without_reminders(history: list[dict]) -> list[dict]:
    """The history less its mid-conversation system messages (still a valid history)."""
    lead = 0
    while lead < len(history) and "parts" not in history[lead]:
        lead += 1
    return history[:lead] + [m for m in history[lead:] if "parts" in m]


UNTRIGGERED = {
    "ContextFilter": {"num_invocations_to_keep": None},
    "Compaction": {"compaction_interval": 1000, "overlap_size": 0},
}
"""Options with which neither library changes anything."""


@settings(max_examples=40, deadline=None)
@given(conversations(shapes=("gemini",)), st.sampled_from(sorted(UNTRIGGERED)))
def test_gemini_contents_go_into_an_adk_session_and_come_back_unchanged(views, history, kind):
    answer = views({"history": history, "adapter": kind, "options": UNTRIGGERED[kind]})
    assert answer["stored"] == history
    assert answer["view"] == history  # nothing trimmed: ADK's pipeline changes nothing


@settings(max_examples=40, deadline=None)
@given(conversations(shapes=("gemini",)).map(_without_reminders), st.sampled_from([1, 2, 3]))
def test_the_view_is_the_plugins_own_cut_after_the_runners_whole_pipeline(views, history, keep):
    answer = views({"history": history, "options": {"num_invocations_to_keep": keep}})
    assert answer["view"] == answer["plugin"]


HISTORY = [
    {"role": "system", "content": "You are a careful agent. {not_state}"},
    {"role": "user", "parts": [{"text": "list the files"}]},
    {"role": "model", "parts": [{"functionCall": {"id": "call_1", "name": "ls", "args": {}}}]},
    {
        "role": "user",
        "parts": [{"functionResponse": {"id": "call_1", "name": "ls", "response": {"out": "a"}}}],
    },
    {"role": "model", "parts": [{"text": "a"}]},
    {"role": "user", "parts": [{"text": "and the tests?"}]},
    {"role": "model", "parts": [{"function_call": {"name": "ls", "args": {"d": "tests"}}}]},
    {"role": "user", "parts": [{"function_response": {"name": "ls", "response": {"out": "t"}}}]},
    {"role": "model", "parts": [{"text": "t"}]},
    {"parts": [{"text": "thanks"}]},
]


def test_the_system_prompt_is_the_agents_instruction_and_survives_every_cut(views):
    # braces in it are no session state: the instruction is a function, which ADK leaves alone
    answer = views({"history": HISTORY, "options": {"num_invocations_to_keep": 1}})
    assert answer["view"] == [HISTORY[0], HISTORY[-1]]


def test_the_cut_moves_left_to_keep_a_function_response_with_its_call(views):
    """The plugin keeps the last N invocations, each starting at a user's text; a cut that
    would keep a response with an id without its call moves left (here it never needs to:
    a Gemini response follows its call, inside the invocation)."""
    answer = views({"history": HISTORY[:-1], "options": {"num_invocations_to_keep": 1}})
    assert answer["view"] == [HISTORY[0], *HISTORY[5:9]]


def test_a_content_without_visible_parts_is_left_out_by_adks_pipeline(views):
    empty = {"role": "user", "parts": [{"text": ""}]}
    answer = views({"history": [*HISTORY, empty], "options": {"num_invocations_to_keep": None}})
    assert answer["view"] == HISTORY


# -- options ---------------------------------------------------------------------------------

_BUILT = """
import json, sys, warnings
from ctxkit.adapters import google_adk

warnings.simplefilter("ignore")  # ADK's 'experimental' notice for EventsCompactionConfig

def settings(adapter):
    if isinstance(adapter, google_adk.ContextFilter):
        plugin, custom = adapter.plugin, adapter.plugin._custom_filter
        return {
            "num_invocations_to_keep": plugin._num_invocations_to_keep,
            "custom_filter": custom and f"{custom.__module__}:{custom.__qualname__}",
            "name": plugin.name,
            "remove_amount": plugin._remove_amount,
        }
    config = adapter.config.model_dump(exclude={"summarizer"})
    summarizer = adapter.config.summarizer
    return {**config, "summarizer": summarizer and type(summarizer).__name__}

answers = []
for kind, options in json.load(sys.stdin):
    try:
        answers.append(settings(getattr(google_adk, kind)(**options)))
    except Exception as exc:
        answers.append({"error": f"{type(exc).__name__}: {exc}"})
print(json.dumps(answers))
"""

FILTER = {
    "num_invocations_to_keep": 3,
    "custom_filter": None,
    "name": "context_filter_plugin",
    "remove_amount": 1,
}
COMPACTION = {
    "compaction_interval": 3,
    "overlap_size": 1,
    "token_threshold": None,
    "event_retention_size": None,
    "summarizer": "LlmEventSummarizer",
}
TOKENS = {**COMPACTION, "compaction_interval": None, "overlap_size": None}
OPTION_CASES = [
    ("ContextFilter", {}, FILTER),
    ("ContextFilter", {"num_invocations_to_keep": 1}, {**FILTER, "num_invocations_to_keep": 1}),
    (
        "ContextFilter",
        {"num_invocations_to_keep": None},
        {**FILTER, "num_invocations_to_keep": None},
    ),
    ("ContextFilter", {"num_invocations_to_keep": "2"}, {**FILTER, "num_invocations_to_keep": "2"}),
    (
        "ContextFilter",
        {"custom_filter": "builtins:list"},
        {**FILTER, "custom_filter": "builtins:list"},
    ),
    ("ContextFilter", {"custom_filter": None}, FILTER),
    ("ContextFilter", {"name": "trim"}, {**FILTER, "name": "trim"}),
    ("ContextFilter", {"name": None}, {**FILTER, "name": None}),
    ("ContextFilter", {"remove_amount": 2}, {**FILTER, "remove_amount": 2}),
    ("ContextFilter", {"remove_amount": 0}, "ValueError: remove_amount must be at least 1"),
    (
        "ContextFilter",
        {"remove_amount": None},
        "TypeError: '<' not supported between instances of 'NoneType'",
    ),
    (
        "ContextFilter",
        {"custom_filter": "list"},
        "TypeError: custom_filter must be a function or 'module:attr'",
    ),
    (
        "ContextFilter",
        {"window": 3},
        "TypeError: google_adk:context_filter (ContextFilterPlugin) has no option 'window'; its "
        "options are num_invocations_to_keep, custom_filter, name, remove_amount",
    ),
    ("Compaction", {}, COMPACTION),
    (
        "Compaction",
        {"compaction_interval": 2, "overlap_size": 0},
        {**COMPACTION, "compaction_interval": 2, "overlap_size": 0},
    ),
    (
        "Compaction",
        {"token_threshold": 100, "event_retention_size": 2},
        {**TOKENS, "token_threshold": 100, "event_retention_size": 2},
    ),
    ("Compaction", {"summarizer": None}, {**COMPACTION, "summarizer": None}),
    (
        "Compaction",
        {"compaction_interval": 2},
        "ValidationError: 1 validation error for EventsCompactionConfig",
    ),
    (
        "Compaction",
        {"compaction_interval": None, "overlap_size": None},
        "ValidationError: 1 validation error for EventsCompactionConfig",
    ),
    (
        "Compaction",
        {"compaction_interval": 2, "overlap_size": -1},
        "ValidationError: 1 validation error for EventsCompactionConfig",
    ),
    (
        "Compaction",
        {"summarizer": "recap"},
        "TypeError: summarizer must be a summarizer or 'module:attr'",
    ),
    (
        "Compaction",
        {"window": 3},
        "TypeError: google_adk:compaction (EventsCompactionConfig) has no option 'window'; its "
        "options are summarizer, compaction_interval, overlap_size, token_threshold, "
        "event_retention_size",
    ),
]


@pytest.fixture(scope="module")
def built(python) -> list[dict]:
    """What each of OPTION_CASES built in the ADK environment: the plugin's or the compaction
    config's settings, or the error that refused the options."""
    done = subprocess.run(
        [python, "-c", _BUILT],
        input=json.dumps([[kind, options] for kind, options, _ in OPTION_CASES]),
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    "case", range(len(OPTION_CASES)), ids=[f"{k}-{o}" for k, o, _ in OPTION_CASES]
)
def test_each_option_reaches_adk_exactly_as_written_or_is_refused(built, case):
    want, got = OPTION_CASES[case][2], built[case]
    if isinstance(want, str):  # refused, by ADK (the value reached it) or by the adapter
        assert got.get("error", "").startswith(want), got
    else:
        assert got == want


def test_a_keep_the_plugin_cannot_compare_is_logged_by_adk_and_nothing_is_cut(views):
    answer = views({"history": HISTORY, "options": {"num_invocations_to_keep": "1"}})
    assert answer["view"] == HISTORY  # ADK catches the filter's error and sends everything


def test_a_custom_filter_replaces_the_contents_after_the_cut(views):
    options = {"num_invocations_to_keep": 1, "custom_filter": "builtins:list"}
    answer = views({"history": HISTORY, "options": options})
    assert answer["view"] == [HISTORY[0], HISTORY[-1]]


def test_remove_amount_waits_for_that_many_extra_invocations_before_cutting(views):
    two = HISTORY[:-1]  # two invocations
    kept = views({"history": two, "options": {"num_invocations_to_keep": 1, "remove_amount": 2}})
    assert kept["view"] == two
    cut = views({"history": HISTORY, "options": {"num_invocations_to_keep": 1, "remove_amount": 2}})
    assert cut["view"] == [HISTORY[0], HISTORY[-1]]


@pytest.mark.parametrize("name", [NAME, COMPACTION_NAME])
def test_the_cli_refuses_an_unknown_option_with_exit_2_naming_the_known_ones(python, name):
    done = subprocess.run(
        [
            *(sys.executable, "-m", "ctxkit", "conformance", name, "--config", '{"window": 3}'),
            *("--command", f"{python} -m ctxkit.conformance.worker"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "has no option 'window'; its options are " in done.stderr


def test_messages_in_other_shapes_are_refused_and_plain_text_taken(views):
    chat = [{"role": "assistant", "content": None, "tool_calls": []}]
    assert views({"history": chat})["error"].startswith("InvalidMessage")
    unknown = [{"role": "user", "parts": [{"text": "hi", "colour": "red"}]}]
    assert "is not a google.genai Content" in views({"history": unknown})["error"]
    plain = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    answer = views({"history": plain, "options": {"num_invocations_to_keep": None}})
    assert answer["view"] == plain


# -- compaction ------------------------------------------------------------------------------

SYSTEM = {"role": "system", "content": "You are a careful agent."}


def _turn(n: int, ids: bool = False, answered: bool = True) -> list[dict]:
    """A question, a tool round and (when ``answered``) the answer: one ADK invocation."""
    call: dict = {"name": "ls", "args": {"n": n}}
    result: dict = {"name": "ls", "response": {"out": "x" * 40}}
    if ids:
        call["id"] = result["id"] = f"call_{n}"
    turn = [
        {"role": "user", "parts": [{"text": f"question {n}"}]},
        {"role": "model", "parts": [{"functionCall": call}]},
        {"role": "user", "parts": [{"functionResponse": result}]},
    ]
    return turn + ([{"role": "model", "parts": [{"text": f"answer {n}"}]}] if answered else [])


def _recap(view: list[dict]) -> list[str]:
    """The texts of the view's summaries (what comes from no history message)."""
    return [
        m["parts"][0]["text"]
        for m in view
        if m.get("role") == "model"
        and "parts" in m
        and m["parts"][0].get("text", "").startswith(("Recap of", "ok"))
    ]


def test_the_docs_window_summarizes_three_finished_invocations_after_the_third(views):
    two = [SYSTEM, *_turn(1), *_turn(2), {"role": "user", "parts": [{"text": "question 3"}]}]
    assert views({"history": two, "adapter": "Compaction"})["view"] == two  # 2 finished: no
    three = [SYSTEM, *_turn(1), *_turn(2), *_turn(3)]
    view = views({"history": three, "adapter": "Compaction"})["view"]
    assert view[0] == SYSTEM
    assert len(view) == 2  # one summary stands for all three
    assert view[1]["parts"][0]["text"].startswith("Recap of")


def test_an_answered_question_is_summarized_with_its_answer_an_open_one_is_not(views):
    open_turn = [SYSTEM, *_turn(1), *_turn(2), *_turn(3, answered=False)]
    view = views({"history": open_turn, "adapter": "Compaction"})["view"]
    assert view == open_turn  # the third invocation is still running: nothing to compact
    answered = [*open_turn, {"role": "model", "parts": [{"text": "answer 3"}]}]
    view = views({"history": answered, "adapter": "Compaction"})["view"]
    assert {"role": "user", "parts": [{"text": "question 3"}]} not in view


def test_a_summarizer_left_to_adk_is_the_agents_own_model(views):
    history = [SYSTEM, *_turn(1), *_turn(2), *_turn(3)]
    options = {"summarizer": None}
    view = views({"history": history, "adapter": "Compaction", "options": options})["view"]
    assert view == [SYSTEM, {"role": "model", "parts": [{"text": "ok"}]}]


def test_token_compaction_keeps_a_retained_results_call_when_they_carry_ids(views):
    history = [*_turn(1, ids=True), *_turn(2, ids=True, answered=False)]
    options = {"token_threshold": 10, "event_retention_size": 1}
    view = views({"history": history, "adapter": "Compaction", "options": options})["view"]
    assert view[1:] == history[-2:]  # the split moved left to the call; the question went
    assert view[0]["parts"][0]["text"].startswith("Recap of")


def test_token_compaction_splits_an_id_less_round_and_adk_drops_the_result(views):
    """ADK pairs by id: without ids (ADK gives every call it records an adk- id, so its own
    sessions always have them) the retained result's call is summarized, and ADK's pipeline
    then drops the result as an orphan: the model is asked to go on without it."""
    history = [*_turn(1), *_turn(2, answered=False)]
    options = {"token_threshold": 10, "event_retention_size": 1}
    view = views({"history": history, "adapter": "Compaction", "options": options})["view"]
    assert len(view) == 1
    assert view[0]["parts"][0]["text"].startswith("Recap of")


# -- the suite's judgement ------------------------------------------------------------------


def test_a_brief_run_judges_the_filter_and_adk_and_finds_invocations_counted(python):
    report = _brief(python, NAME)
    assert report.depth["shapes"] == ["gemini"]
    statuses = {p.id: p.status for p in report.properties}
    assert all(statuses[p] == "passed" for p in ADK_PART), statuses
    assert_judged(report, ADAPTER_PART, by_name(NAME).findings)
    (budget,) = [p for p in report.properties if p.id == "budget"]
    assert budget.status == "failed"  # a plugin that counts invocations meets a small budget
    assert re.search(r"at a budget of [\d,]+ the view has [\d,]+ tokens", budget.message)


def test_a_reminder_is_a_users_turn_to_the_plugin_and_can_push_the_question_out(views):
    reminder = {"role": "system", "content": "Reminder: run the tests"}
    history = [*HISTORY, {"role": "model", "parts": [{"text": "done"}]}, reminder]
    answer = views({"history": history, "options": {"num_invocations_to_keep": 1}})
    assert answer["view"] == [HISTORY[0], reminder]  # "thanks" and its answer are cut


def test_a_run_keeping_one_invocation_sends_no_reminder_gemini_contents_cannot_hold(python):
    """Gemini keeps the system instruction beside its contents, so the run sends the plugin
    no system message (the reminder above is what one would do to it): keeping one invocation
    then keeps the newest question, and the report says what was left out."""
    # About 20 s: every view builds a real ADK App, Runner and session in ADK's environment.
    report = _brief(python, NAME, {"num_invocations_to_keep": 1})
    assert_judged(report, ADAPTER_PART | ADK_PART, by_name(NAME).findings)
    assert report.shapes.system_left_out == {"gemini": "systemInstruction"}
    (kept,) = [p for p in report.properties if p.id == "preservation"]
    assert kept.status == "passed", kept.message


def test_a_brief_run_judges_compaction_and_finds_answered_questions_summarized(python):
    """Compacting after every invocation (the docs' window needs three, which a brief run
    seldom finishes) shows at once what the window does to an answered question."""
    report = _brief(python, COMPACTION_NAME, {"compaction_interval": 1, "overlap_size": 0})
    statuses = {p.id: p.status for p in report.properties}
    assert all(statuses[p] == "passed" for p in ADK_PART), statuses
    assert_judged(report, ADAPTER_PART, by_name(COMPACTION_NAME).findings)
    (budget,) = [p for p in report.properties if p.id == "budget"]
    assert budget.status == "failed"
    assert re.search(r"at a budget of [\d,]+ the view has [\d,]+ tokens", budget.message)
    (kept,) = [p for p in report.properties if p.id == "preservation"]
    assert kept.status == "failed", kept.message
    history, _ = history_before_view(kept.counterexample["trace"])
    assert "the newest user message" in kept.message or "system message" in kept.message
    assert history[-1]["role"] != "user" or "parts" not in history[-1]  # a finished turn


def test_the_survey_finds_the_adapters_installed_in_the_other_environment(python):
    found = {s.target: s for s in subjects_in(python, skip={COMPACTION_NAME})}
    assert COMPACTION_NAME not in found  # already surveyed: not twice
    subject = found[NAME]
    assert subject.python == python
    assert int(subject.version.split(".")[0]) >= 2
    assert subject.findings["budget"].kind == "design"
    assert "preservation" not in subject.findings  # Gemini contents get no system reminders
