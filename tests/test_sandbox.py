"""ctxkit.conformance.targets.sandbox: a command runs contained, and nothing it starts
outlives it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from ctxkit.conformance.targets.sandbox import (
    Contained,
    descendants,
    format_size,
    parse_size,
    run_contained,
)
from tests.processes import ROOT, alive, left_after, marked, marked_environment

MIB = 1 << 20


def python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


# Prints the pids of two sleep children (one in a session of its own) and of a double-forked
# daemon, all started from its marked environment, then waits for ever or exits.
SPAWNER = """
    import os, subprocess, sys, time
    kids = [subprocess.Popen(["sleep", "600"]).pid,
            subprocess.Popen(["sleep", "600"], start_new_session=True).pid]
    read, write = os.pipe()
    if os.fork() == 0:
        os.setsid()
        daemon = os.fork()
        if daemon == 0:
            os.execvp("sleep", ["sleep", "600"])
        os.write(write, str(daemon).encode())
        os._exit(0)
    os.close(write)
    kids.append(int(os.read(read, 64)))
    print(*kids, flush=True)
    if sys.argv[1] == "wait":
        time.sleep(600)
"""


def wait_for_output(process: Contained, seconds: float = 10.0) -> str:
    deadline = time.monotonic() + seconds
    while not process.output().strip() and time.monotonic() < deadline:
        time.sleep(0.02)
    return process.output()


# -- running and ending ---------------------------------------------------------------------


def test_status_output_and_how_it_ended_come_back():
    assert run_contained(python("print('hi'); raise SystemExit(3)"), timeout=10) == (
        3,
        "hi\n",
        "exited",
    )
    status, _output, ended = run_contained(python("import os; os.kill(os.getpid(), 9)"), timeout=10)
    assert (status, ended) == (-9, "killed")


def test_a_command_past_its_time_is_ended_and_says_timeout():
    started = time.monotonic()
    status, _output, ended = run_contained(["sleep", "30"], timeout=0.3)
    assert ended == "timeout"
    assert status == -signal.SIGKILL
    assert time.monotonic() - started < 5


def test_kill_tree_ends_children_and_a_double_forked_daemon(marker):
    with Contained([*python(SPAWNER), "wait"], env=marked_environment(marker)) as process:
        pids = [int(word) for word in wait_for_output(process).split()]
        assert len(pids) == 3
        assert all(alive(pid) for pid in pids)
        assert set(pids) <= set(descendants(process._supervisor.pid))  # re-parented to it
        process.kill_tree()
        assert process.ended == "killed"
    assert not left_after(marker, 3.0)


def test_what_a_command_leaves_running_ends_when_it_exits(marker):
    status, output, ended = run_contained(
        [*python(SPAWNER), "exit"], timeout=10, env=marked_environment(marker)
    )
    assert (status, ended) == (0, "exited")
    assert len(output.split()) == 3
    assert not left_after(marker, 3.0)


def test_the_command_leads_its_own_session_reads_dev_null_and_gets_default_signals():
    code = """
        import os, signal, sys
        print(os.getsid(0) == os.getpid(), repr(sys.stdin.read()))
        print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)
    """
    assert run_contained(python(code), timeout=10).output == "True ''\nTrue\n"


def test_passed_descriptors_reach_the_command_under_the_same_number():
    read, write = os.pipe()
    try:
        code = f"import os; os.write({write}, b'through the pipe')"
        with Contained(python(code), pass_fds=(write,)) as process:
            os.close(write)
            assert process.wait(10) == 0
        assert os.read(read, 100) == b"through the pipe"
    finally:
        os.close(read)


def test_a_command_that_cannot_start_says_why():
    with pytest.raises(OSError, match="cannot start '/no/such/program'"):
        Contained(["/no/such/program"])


# -- the lifeline ---------------------------------------------------------------------------

CALLER = """
    import sys, time
    from ctxkit.conformance.targets.sandbox import Contained
    process = Contained(["sleep", "600"])
    print(process.pid, flush=True)
    time.sleep(600)
"""


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
def test_the_tree_dies_with_its_caller_however_the_caller_dies(marker, signum):
    caller = subprocess.Popen(
        python(CALLER), stdout=subprocess.PIPE, text=True, env=marked_environment(marker), cwd=ROOT
    )
    try:
        sleeper = int(caller.stdout.readline())
        assert alive(sleeper)
        caller.send_signal(signum)
        caller.wait(5)
        assert not left_after(marker, 3.0)
    finally:
        caller.kill()
        caller.wait()
        caller.stdout.close()


# -- output ---------------------------------------------------------------------------------


def test_output_keeps_the_head_and_the_tail_and_says_what_was_dropped():
    code = """
        import sys
        sys.stdout.write("FIRST" + "a" * 100_000)
        for _ in range(64):
            sys.stdout.write("b" * 65536)
        sys.stdout.write("z" * 100_000 + "LAST")
    """
    with Contained(python(code), output_keep=64 * 1024) as process:
        assert process.wait(20) == 0
        text = process.output()
        assert process.output_size == 5 + 100_000 + 64 * 65536 + 100_000 + 4
    assert text.startswith("FIRST")
    assert text.endswith("LAST")
    assert "of output dropped: the first and last 64 KiB are kept" in text
    assert len(text) < 3 * 64 * 1024


def test_a_chatty_command_is_drained_and_never_blocks():
    """4 GiB or so a second: a command that only prints keeps printing until its time is up."""
    code = "import sys\nwhile True: sys.stdout.write('noise ' * 10000)"
    _status, output, ended = run_contained(python(code), timeout=1.0)
    assert ended == "timeout"
    assert "of output dropped" in output
    assert len(output) < 2 * MIB + 200


# -- memory ---------------------------------------------------------------------------------


def test_a_memory_error_is_out_of_memory():
    outcome = run_contained(python("x = b'x' * (512 << 20)"), timeout=10, memory_limit=256 * MIB)
    assert outcome.ended == "memory"
    assert "MemoryError" in outcome.output


def test_an_allocator_abort_is_out_of_memory():
    code = """
        import os, sys
        sys.stderr.write("memory allocation of 1073741824 bytes failed\\n")
        os.abort()
    """
    assert run_contained(python(code), timeout=10).ended == "memory"


def test_a_kill_near_the_limit_is_out_of_memory_and_far_from_it_is_not():
    code = """
        import os, signal
        hoard = []
        try:
            while True:
                hoard.append(b"m" * (4 << 20))
        except MemoryError:
            os.kill(os.getpid(), signal.SIGKILL)
    """
    assert run_contained(python(code), timeout=20, memory_limit=256 * MIB).ended == "memory"
    quick_death = "import os; os.kill(os.getpid(), 9)"
    assert run_contained(python(quick_death), timeout=10, memory_limit=256 * MIB).ended == "killed"


def test_the_address_space_is_capped_and_none_lifts_the_cap():
    code = "import resource; print(resource.getrlimit(resource.RLIMIT_AS)[0])"
    assert run_contained(python(code), timeout=10, memory_limit=300 * MIB).output == (
        f"{300 * MIB}\n"
    )
    assert run_contained(python(code), timeout=10, memory_limit=None).output == "-1\n"


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("2G", 2 << 30),
        ("512M", 512 << 20),
        ("1.5GiB", 1536 << 20),
        ("65536", 65536),
        ("64k", 64 << 10),
        ("0", None),
        ("none", None),
        ("OFF", None),
    ],
)
def test_sizes_read_as_binary_units(text, size):
    assert parse_size(text) == size


def test_a_bad_size_says_what_is_accepted():
    with pytest.raises(ValueError, match=r"e\.g\. 512M, 2G"):
        parse_size("lots")


def test_sizes_print_in_binary_units():
    assert [format_size(n) for n in (2 << 30, 1536 << 20, 512 << 20, 3 << 10, 12)] == [
        "2 GiB",
        "1.5 GiB",
        "512 MiB",
        "3 KiB",
        "12 bytes",
    ]


def test_no_marked_process_is_left_by_this_module(marker):
    """The marker finder itself sees a marked process, so the checks above mean something."""
    sleeper = subprocess.Popen(["sleep", "30"], env=marked_environment(marker))
    try:
        deadline = time.monotonic() + 10  # under load, a new process's environ can lag
        while (found := marked(marker)) != [sleeper.pid] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert found == [sleeper.pid]
    finally:
        sleeper.kill()
        sleeper.wait()
