"""The plain install (issue 47): ``pip install .`` and nothing else, in a virtualenv that sees
no other packages, runs every command on its plain inputs (request bodies, OTLP JSON, history
files), and what truly needs an extra says which one, as exit 2.

The virtualenv is CI's (``.ci/run`` makes it from nothing and names it in
``CTXKIT_PLAIN_VENV``); elsewhere the test makes one from the package index, and skips when
the index cannot be reached.
"""

from __future__ import annotations

import json
import os
import subprocess
import venv
from pathlib import Path

import pytest

from tests.processes import clean_copy
from tests.system import missing
from tests.test_watch import post, watching

PLAIN_VENV = "CTXKIT_PLAIN_VENV"

EXTRAS_ONLY = ("grpcio", "opentelemetry-sdk", "zstandard", "amplifier-core", "langchain-core")
"""Distributions only an extra brings: none is in the plain install."""

CHAT = [
    {"model": "gpt-4o", "messages": [{"role": "user", "content": "what is 2+2?"}]},
    {
        "model": "gpt-4o",
        "messages": [
            {"role": "user", "content": "what is 2+2?"},
            {"role": "assistant", "content": "4"},
            {"role": "user", "content": "and 3+3?"},
        ],
    },
]
"""Two request bodies of one Chat Completions conversation."""


def _span_line(conversation: str, messages: list[dict]) -> str:
    """One OTLP/JSON traces export, as the Collector's file exporter writes it: a chat span
    holding its input messages in the GenAI form."""
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": "openai",
        "gen_ai.conversation.id": conversation,
        "gen_ai.input.messages": json.dumps(messages),
    }
    span = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": f"{len(messages):016x}",
        "name": "chat gpt-4o",
        "kind": 3,
        "startTimeUnixNano": str(1_700_000_000_000_000_000 + len(messages)),
        "endTimeUnixNano": str(1_700_000_000_000_000_001 + len(messages)),
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attributes.items()],
    }
    scope = {"scope": {"name": "opentelemetry.instrumentation.openai_v2"}, "spans": [span]}
    return json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [scope]}]})


def _genai(text: str, role: str = "user") -> dict:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


SPANS = [
    _span_line("c1", [_genai("what is 2+2?")]),
    _span_line("c1", [_genai("what is 2+2?"), _genai("4", "assistant"), _genai("and 3+3?")]),
]


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``bin`` folder of a virtualenv holding ``pip install .`` and nothing else."""
    named = os.environ.get(PLAIN_VENV)
    if named:
        return Path(named) / "bin"
    home = tmp_path_factory.mktemp("plain") / "venv"
    venv.EnvBuilder(with_pip=True).create(home)
    checkout = clean_copy(tmp_path_factory.mktemp("checkout"))
    pip = [str(home / "bin" / "python"), "-m", "pip", "install", "--quiet", "--progress-bar=off"]
    done = subprocess.run(
        [*pip, str(checkout)], capture_output=True, text=True, timeout=600, check=False
    )
    if done.returncode != 0:
        missing(f"pip install . from the package index failed:\n{done.stderr[-2000:]}")
    return home / "bin"


def _ctxkit(plain: Path, *args: str, cwd: Path, timeout: float = 180) -> tuple[int, str]:
    done = subprocess.run(
        [str(plain / "ctxkit"), *args], cwd=cwd, capture_output=True, text=True,
        timeout=timeout, check=False, env={"PATH": os.environ["PATH"], "HOME": str(cwd)},
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr


def test_the_plain_install_holds_no_extra(plain: Path):
    listed = subprocess.run(
        [str(plain / "python"), "-m", "pip", "list", "--format=json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    names = {entry["name"].lower() for entry in json.loads(listed.stdout)}
    assert "ctxkit-llm" in names
    assert not names & set(EXTRAS_ONLY), names & set(EXTRAS_ONLY)


def test_each_command_runs_its_first_example_on_the_plain_install(plain: Path, tmp_path: Path):
    """The first example of each command's --help, on the plain inputs (the demo and the
    conformance run shortened: the imports and code paths are the same)."""
    (tmp_path / "requests.jsonl").write_text("".join(json.dumps(b) + "\n" for b in CHAT))
    (tmp_path / "traces.jsonl").write_text("".join(line + "\n" for line in SPANS))
    runs = {
        "audit bodies": ("audit", "requests.jsonl"),
        "audit OTLP JSON": ("audit", "traces.jsonl"),
        "replay": ("replay", "traces.jsonl", "--manager", "reference"),
        "tokens": ("tokens",),
        "inspect --help": ("inspect", "--help"),
        "demo": ("demo", "--duration", "2", "--events", "events.jsonl"),
        "contexts": ("contexts", "list", str(tmp_path)),
        "conformance": ("conformance", "--profile", "quick"),
    }
    for what, args in runs.items():
        code, said = _ctxkit(plain, *args, cwd=tmp_path)
        assert code == 0, f"ctxkit {' '.join(args)} ({what}) exited {code}:\n{said}"
    code, said = _ctxkit(plain, "audit", "requests.jsonl", cwd=tmp_path)
    assert "2 requests" in said, said
    code, said = _ctxkit(plain, "audit", "traces.jsonl", cwd=tmp_path)
    assert "2 requests" in said, said


def test_watch_receives_one_request_over_otlp_http_json_on_the_plain_install(
    plain: Path, tmp_path: Path
):
    with watching(tmp_path, ctxkit=[str(plain / "ctxkit")]) as receiver:
        status, _, _ = post(f"{receiver.url}/v1/traces", SPANS[0].encode(), "application/json")
        assert status == 200
        report = receiver.stop()
    assert report["requests"] == 1, report


def test_what_needs_an_extra_names_it_and_exits_2(plain: Path, tmp_path: Path):
    import zstandard

    export = zstandard.ZstdCompressor().compress(SPANS[0].encode())
    (tmp_path / "framed.bin").write_bytes(len(export).to_bytes(4, "big") + export)
    cases = {
        ("demo", "--otlp", "--duration", "1"): "ctxkit-llm[otel]",
        ("watch", "--otlp-grpc", "127.0.0.1:0"): "ctxkit-llm[grpc]",
        ("audit", "framed.bin"): "ctxkit-llm[audit]",
        ("conformance", "grpc://127.0.0.1:1"): "ctxkit-llm[grpc]",
    }
    for args, extra in cases.items():
        code, said = _ctxkit(plain, *args, cwd=tmp_path, timeout=60)
        assert code == 2, f"ctxkit {' '.join(args)} exited {code}:\n{said}"
        assert extra in said, said
        assert "Traceback" not in said, said
        assert "internal error" not in said, said
