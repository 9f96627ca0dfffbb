"""The conformance protocol (conformance/PROTOCOL.md): every message the runner and the Python
worker exchange fits the schema; the digest matches its test vectors; ``--command`` judges a
target exactly as the direct route does; programs that do not speak it get a clear error."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import jsonschema
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ctxkit.conformance.replay import open_manager
from ctxkit.conformance.runner import RunOptions, SetupError, run
from ctxkit.conformance.targets.protocol import RunningDigest, canonical_json, digest
from ctxkit.conformance.worker import HistoryDigest, _history_digest
from tests.shared_runs import shared
from tests.system import require_binary

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "conformance"
WORKER = f"{sys.executable} -m ctxkit.conformance.worker"


@pytest.fixture(scope="module")
def schema() -> dict:
    found = json.loads((SPEC / "protocol.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(found)
    return found


def validator(schema: dict, name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator({"$defs": schema["$defs"], "$ref": f"#/$defs/{name}"})


@shared
def transcript_of(target: str) -> list[dict]:
    """Every protocol line of a quick run of ``target`` (made once for the tests that read
    the same run)."""
    with tempfile.TemporaryDirectory(prefix="ctxkit-transcript-") as folder:
        path = Path(folder) / "transcript.jsonl"
        with path.open("w", encoding="utf-8") as log:
            run(RunOptions(target=target, profile="quick", seed=3, transcript=log))
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize(
    "target",
    [
        "tests.zoo.base:GoodManager",  # every op, edit_after, add_many, bad messages refused
        "tests.zoo.history:LeaksReferences",  # answers that show a caller's edits
        "tests.zoo.misc:LacksClear",  # a contract error on reset
        "tests.zoo.amplifier:mount_own_event",  # events
    ],
)
def test_every_request_and_answer_fits_the_schema(schema, target):
    # About 20 s on a loaded machine for GoodManager: a whole quick run, every protocol line
    # of it (thousands) validated against the schema.
    lines = transcript_of(target)
    requests = [line["request"] for line in lines if "request" in line]
    answers = [line["answer"] for line in lines if "answer" in line]
    assert len(requests) == len(answers) > 1
    for request in requests:
        validator(schema, "request").validate(request)
    for answer in answers:
        validator(schema, "answer").validate(answer)
    assert requests[0]["op"] == "hello"
    validator(schema, "hello_value").validate(answers[0]["value"])
    assert {r["op"] for r in requests} <= {
        "hello", "reset", "add", "add_many", "view", "get", "set", "clear"
    }  # fmt: skip


def test_a_run_exercises_every_op_and_answer_field():
    lines = transcript_of("tests.zoo.amplifier:mount_own_event")
    requests = [line["request"] for line in lines if "request" in line]
    answers = [line["answer"] for line in lines if "answer" in line]
    assert {r["op"] for r in requests} == {
        "hello", "reset", "add", "add_many", "view", "get", "set", "clear"
    }  # fmt: skip
    assert any(r["args"].get("edit_after") for r in requests)
    assert any(r["args"].get("provider") for r in requests if r["op"] == "view")
    assert any(a.get("events") for a in answers)
    assert any("before" in a for a in answers)
    assert any(a["ok"] is False and a["kind"] == "raised" for a in answers)  # bad messages


def test_the_digest_matches_its_test_vectors():
    cases = json.loads((SPEC / "digest_cases.json").read_text(encoding="utf-8"))["cases"]
    assert len(cases) >= 5
    for case in cases:
        kept = [{k: v for k, v in m.items() if k not in case["ignore"]} for m in case["history"]]
        assert canonical_json(kept) == case["canonical"], case["name"]
        assert digest(case["history"], case["ignore"]) == case["digest"], case["name"]
        running = RunningDigest(case["ignore"])
        for message in case["history"]:
            running.add(message)
        assert running.hexdigest() == case["digest"], case["name"]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)
_KEYS = st.sampled_from(["role", "content", "metadata", "é"])


@given(
    st.lists(st.dictionaries(_KEYS, _JSON) | _JSON, max_size=6),
    st.sampled_from([(), ("metadata",)]),
)
def test_a_digest_kept_as_the_history_grows_is_the_digest_of_the_whole(history, ignore):
    """The runner keeps its history's digest message by message; the worker digests what
    get_messages() returns whole: the two must agree, or every step would ask for the
    history to compare."""
    running = RunningDigest(ignore)
    for number, message in enumerate(history, start=1):
        running.add(message)
        assert running.hexdigest() == digest(history[:number], ignore)
    assert running.hexdigest() == digest(history, ignore)


def _twin(value: object) -> object:
    """A value that is == to ``value`` in Python but written differently in JSON (or, for a
    string, an equal string that is another object)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return float(value) if abs(value) < 2**53 else -value
    if isinstance(value, float):
        return not value if value in (0.0, 1.0) else -value
    if isinstance(value, str):
        return "".join(list(value))
    return [value]


_EDITS = st.one_of(
    st.tuples(st.just("append"), st.dictionaries(_KEYS, _JSON) | _JSON),
    st.tuples(st.just("set"), st.integers(0, 9), _KEYS, _JSON),
    st.tuples(st.sampled_from(["twin", "reorder", "drop", "odd", "clear"]), st.integers(0, 9)),
)


@given(st.lists(_EDITS, max_size=12), st.sampled_from([frozenset(), frozenset({"metadata"})]))
@example([("append", {"role": 1}), ("twin", 0)], frozenset())  # 1 == 1.0, "1" != "1.0"
@example([("append", {"content": True}), ("twin", 0)], frozenset())
@example([("append", {"role": "a"}), ("append", {}), ("reorder", 0)], frozenset())
def test_the_workers_digest_kept_between_calls_is_the_digest_of_the_whole(edits, ignore):
    """The worker digests get_messages() after every call, writing only what was added since
    its last answer when the history still begins with what it held then: whatever happens
    to the history between two calls (messages added, edited in place, swapped for values
    Python calls equal but JSON does not, keys reordered, dropped, things JSON cannot hold),
    its digest is the digest of the whole history."""
    history: list = []
    kept = HistoryDigest(ignore)
    for edit in edits:
        where = edit[1] % len(history) if history and edit[0] != "append" else None
        message = history[where] if where is not None else None
        if edit[0] == "append":
            history.append(edit[1])
        elif edit[0] == "clear":
            history = []
        elif edit[0] == "drop" and where is not None:
            del history[where]
        elif isinstance(message, dict) and message:
            key = next(iter(message))
            if edit[0] == "set":
                message[edit[2]] = edit[3]
            elif edit[0] == "twin":
                message[key] = _twin(message[key])
            elif edit[0] == "reorder":
                history[where] = dict(reversed(message.items()))
            elif edit[0] == "odd":
                message[key] = {1, 2} if where % 2 else b"bytes"
        assert kept.of(history) == _history_digest(history, ignore), edit


@pytest.mark.parametrize(
    ("target", "failing"),
    [
        ("tests.zoo.base:GoodManager", set()),
        ("tests.zoo.pairs:SplitsPairsOpenAI", {"tool_pair_integrity"}),
        ("tests.zoo.history:LeaksReferences", {"isolation"}),
    ],
)
def test_a_command_is_judged_as_the_direct_route_and_its_reproducer_verified(target, failing):
    """The Python worker started as a --command: the same verdicts, and reproducers that
    reach the target through the protocol (edits made in its process) still fail."""
    short = {"profile": "quick", "seed": 5, "max_examples": 10, "shrink_seconds": 4.0}
    direct = run(RunOptions(target=target, **short))
    command = run(RunOptions(target=target, implementation=WORKER, **short))
    for report in (direct, command):
        assert {p.id for p in report.properties if p.status == "failed"} == failing
    for result in command.properties:
        if result.status == "failed":
            assert "open_manager(TARGET, CONFIG, command=COMMAND)" in result.reproducer
            assert result.verified, result.verification


def test_open_manager_reaches_a_remote_target_through_the_protocol():
    asyncio.run(remote_calls())


async def remote_calls() -> None:
    manager, events = await open_manager("tests.zoo.amplifier:mount_own_event", command=WORKER)
    message = {"role": "user", "content": "hello"}
    await manager.add_message(message, edit_after=True)
    assert message == {"role": "user", "content": "hello"}  # edited there, not here
    assert await manager.get_messages() == [{"role": "user", "content": "hello"}]
    view = await manager.get_messages_for_request(token_budget=1000)
    assert view == [{"role": "user", "content": "hello"}]
    await manager.clear()
    assert await manager.get_messages() == []
    assert isinstance(events, list)
    manager.close()


SILENT = f"{sys.executable} -c 'import time; time.sleep(30)'"
DIES = f"{sys.executable} -c 'raise SystemExit(4)'"
WRONG_VERSION = (
    f"{sys.executable} -c \"import json,os,sys; r,w=map(int,os.environ['CTXKIT_PROTOCOL_FDS']"
    f".split(',')); hello=json.loads(os.fdopen(r).readline()); out=os.fdopen(w,'w'); "
    "out.write(hello['args']['token']+' '+json.dumps({'ok':False,'kind':'protocol','error':"
    "{'type':'ProtocolVersion','message':'speaks 2'}})+chr(10)); out.flush()\""
)


@pytest.mark.parametrize(
    ("command", "fragment"),
    [
        ("no-such-program-ctxkit --x", "no program 'no-such-program-ctxkit' on PATH"),
        ("'unbalanced", "is not a command line"),
        (DIES, "died during loading the target (exit code 4)"),
        (WRONG_VERSION, "could not read the 'hello' request: ProtocolVersion: speaks 2"),
    ],
)
def test_a_program_that_does_not_speak_the_protocol_is_a_setup_error(command, fragment):
    with pytest.raises(SetupError) as caught:
        run(RunOptions(implementation=command, profile="quick", timeout=2.0))
    assert fragment in str(caught.value)


def test_a_silent_program_times_out_at_hello_and_the_cli_says_what_to_check():
    done = subprocess.run(
        [sys.executable, "-m", "ctxkit", "conformance", "--command", SILENT, "--deadline", "5"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "does it speak ctxkit's conformance protocol?" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_minimal_implementation_in_perl_written_from_the_document_passes():
    """conformance/examples/minimal.pl: the protocol in a third language, core Perl only."""
    perl = require_binary("perl")
    example = SPEC / "examples" / "minimal.pl"
    vectors = subprocess.run(
        [perl, str(example), "--self-test", str(SPEC / "digest_cases.json")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert vectors.returncode == 0, vectors.stdout + vectors.stderr
    assert "not ok" not in vectors.stdout
    report = run(
        RunOptions(implementation=f"{perl} {example}", profile="quick", seed=2, max_examples=15)
    )
    assert report.verdict == "pass", [(p.id, p.status, p.message) for p in report.properties]
    assert {p.id for p in report.properties if p.status == "failed"} == set()
