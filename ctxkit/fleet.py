"""``ctxkit demo --processes N``: a fleet of demo processes, each with its own ``/metrics``.

Conversations are shared out in contiguous blocks (process 0 has ``demo-1`` up to its
share, process 1 the next ones, and so on), so the first ``near_limit`` conversations,
those constructed near their limit, sit in the first processes: the near-limit alert fires
for those instances and for no other. Process ``i`` serves ``/metrics`` on port ``P + i``.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["BUDGET_FACTORS", "Member", "budget_mix", "plan", "prometheus_config", "run_fleet"]

BUDGET_FACTORS = (1.0, 1.5, 2.0, 3.0)
"""A fleet's conversations take ``--budget`` times these in turn (near-limit ones 64k)."""


def budget_mix(budget: int) -> tuple[int, ...]:
    """The budgets a fleet's conversations take in turn."""
    return tuple(int(budget * factor) for factor in BUDGET_FACTORS)


@dataclass(frozen=True, slots=True)
class Member:
    """One process of the fleet: which conversations it runs, where it serves metrics."""

    index: int
    first_conversation: int
    conversations: int
    near_limit: int
    port: int | None


def plan(conversations: int, processes: int, near_limit: int, port: int | None) -> list[Member]:
    """Share ``conversations`` out over ``processes`` in contiguous blocks, the first
    ``near_limit`` of them constructed near their limit."""
    members = []
    first = 1
    for index in range(processes):
        share = conversations // processes + (1 if index < conversations % processes else 0)
        near = max(0, min(share, near_limit - (first - 1)))
        members.append(
            Member(
                index=index,
                first_conversation=first,
                conversations=share,
                near_limit=near,
                port=None if port is None else port + index,
            )
        )
        first += share
    return members


def prometheus_config(host: str, ports: Sequence[int], *, job: str = "ctxkit-demo") -> str:
    """A Prometheus configuration that scrapes every process of the fleet. Add
    ``rule_files: [dashboards/alerts.yml]`` to load ctxkit's alert rules."""
    targets = ", ".join(f'"{host}:{port}"' for port in ports)
    return (
        f"# Written by ctxkit demo --processes {len(ports)}: scrape every process's /metrics.\n"
        "global:\n"
        "  scrape_interval: 15s\n"
        "  evaluation_interval: 15s\n"
        "scrape_configs:\n"
        f"  - job_name: {job}\n"
        "    static_configs:\n"
        f"      - targets: [{targets}]\n"
    )


def run_fleet(members: list[Member], child_args: list[str]) -> int:
    """Start one ``ctxkit demo`` per member, wait for all, print each one's summary; the
    exit code is the worst of theirs. Interrupted, every process is stopped."""
    processes: list[subprocess.Popen[str]] = []
    try:
        with _held(signal.SIGINT, signal.SIGTERM):  # delivered once every process is listed
            _start(members, child_args, processes)
        codes = []
        for member, process in zip(members, processes, strict=True):
            stdout, stderr = process.communicate()
            codes.append(process.returncode)
            print(f"[process {member.index}] " + stdout.strip().replace("\n", "\n  "))
            if process.returncode not in (0, 1):
                print(f"[process {member.index}] {stderr.strip()}", file=sys.stderr)
        return max(codes)
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _start(
    members: list[Member], child_args: list[str], processes: list[subprocess.Popen[str]]
) -> None:
    """One ``ctxkit demo`` per member, each listed in ``processes`` as soon as it runs."""
    for member in members:
        args = [
            sys.executable,
            "-m",
            "ctxkit",
            "demo",
            *child_args,
            "--conversations",
            str(member.conversations),
            "--fleet-first",
            str(member.first_conversation),
            "--near-limit",
            str(member.near_limit),
        ]
        if member.port is not None:
            args += ["--metrics-port", str(member.port)]
        processes.append(
            subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        )


@contextlib.contextmanager
def _held(*signals: signal.Signals) -> Iterator[None]:
    """Hold ``signals`` back within the block, then deliver them: a stop that came while a
    process was being started (forked, not yet listed) would leave it running. (Noted by a
    handler, not blocked: a blocked signal stays blocked in the processes started.)"""
    came: list[int] = []

    def note(signum: int, _frame: Any) -> None:
        came.append(signum)

    try:
        previous = {s: signal.signal(s, note) for s in signals}
    except ValueError:  # not the main thread: signals are not delivered here anyway
        yield
        return
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if came:
            signal.raise_signal(came[0])
