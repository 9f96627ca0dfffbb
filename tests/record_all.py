"""Rebuild tests/recordings/: every instrumentation's recording, made by its script with the
real library against the loopback fake provider, kept as the Collector's file exporter writes
it. The tests audit these files (fast, with no library installed) and record most of them
again live (tests/test_audit_instrumentations.py), so a library that changes what it records
is caught, and one that cannot be installed beside the others still has its recording here.

    python tests/record_all.py [NAME ...] [--pythonpath DIR]

NAME: a recording of :func:`recordings` (default: all). ``--pythonpath DIR`` is put first on
the recorders' path: OpenTelemetry's official google-genai instrumentation needs
opentelemetry-util-genai 1.x, which the tests' environment cannot hold beside openai-v2 2.4b0
(``pip install --no-deps --target DIR opentelemetry-util-genai==1.3b0
opentelemetry-instrumentation-google-genai==1.3b0``). A recorder that fails is reported and
the others go on; the exit code says whether any failed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FOLDER = ROOT / "tests" / "recordings"


def recordings() -> dict[str, list[str]]:
    """Each recording's name and the command that makes it (``{out}`` for the file, ``{url}``
    for the fake provider's base URL where the recorder does not start its own)."""
    from tests.record_instrumented import CONTENT_SETTINGS as INSTRUMENTED
    from tests.record_langchain import CONTENT_SETTINGS as LANGCHAIN
    from tests.record_more import CONTENT_SETTINGS as MORE
    from tests.record_pydantic_ai import VERSIONS

    python = [sys.executable]
    found = {
        name: [*python, "tests/record_instrumented.py", name, "--file", "{out}"]
        for name in INSTRUMENTED
    }
    found.update(
        {name: [*python, "tests/record_more.py", name, "--file", "{out}"] for name in MORE}
    )
    for name in LANGCHAIN:
        found[name] = [*python, "tests/record_langchain.py", name, "--file", "{out}"]
        found[f"{name}-chain"] = [*found[name], "--chain"]
    found["openinference-openai-agents"] = [
        *python, "tests/record_openai_agents.py", "openinference-openai-agents", "--file", "{out}"
    ]  # fmt: skip
    for version in VERSIONS:
        found[f"pydantic-ai-v{version}"] = [
            *python, "tests/record_pydantic_ai.py", "--version", str(version), "--file", "{out}"
        ]  # fmt: skip
    node = shutil.which("node") or "node"
    for mode in ("legacy", "otel", "ai5", "ai6"):
        found[f"ai-sdk-{mode}"] = [
            node, "tests/js/record_ai_sdk.mjs", mode, "--base-url", "{url}", "--out", "{out}"
        ]  # fmt: skip
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME")
    parser.add_argument("--pythonpath", type=Path, metavar="DIR")
    args = parser.parse_args()
    every = recordings()
    unknown = sorted(set(args.names) - set(every))
    if unknown:
        parser.error(f"unknown recording(s) {', '.join(unknown)}; choose from {', '.join(every)}")
    from tests.fake_provider import FakeProvider

    env = dict(os.environ)
    if args.pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(args.pythonpath), env.get("PYTHONPATH", "")])
    FOLDER.mkdir(exist_ok=True)
    failed = []
    with FakeProvider() as fake:
        for name in args.names or every:
            out = FOLDER / f"{name}.jsonl"
            command = [part.format(out=out, url=fake.url) for part in every[name]]
            done = subprocess.run(
                command, cwd=ROOT, env=env, capture_output=True, text=True, check=False
            )
            if done.returncode != 0:
                failed.append(name)
                last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
                print(f"{name}: FAILED: {last}", file=sys.stderr)
            else:
                print(f"{name}: {out.relative_to(ROOT)} ({out.stat().st_size:,} bytes)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
