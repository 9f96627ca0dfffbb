"""``ctxkit contexts``: list, show and archive the conversations stored in a directory or a
PostgreSQL database, and copy one between the two.

The work is done by :mod:`ctxkit.reference.lifecycle` (files) and
:mod:`ctxkit.reference.postgres.lifecycle` (a database); this module reads options, finds the
directory or database, and prints tables, details and actions (or JSON).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ctxkit.cli.errors import EXIT_FOUND_PROBLEM, EXIT_OK, UsageError
from ctxkit.cli.options import duration
from ctxkit.cli.output import print_table

__all__ = ["ENV_DIR", "add_parser"]

ENV_DIR = "CTXKIT_STORAGE_DIR"
"""Where the conversations are when no DIR is given (else the current directory): a directory
or a ``postgresql://`` URL."""

EXIT_SKIPPED_OPEN = EXIT_FOUND_PROBLEM

DESCRIPTION = f"""\
The conversations a ReferenceContextManager stores with storage_path=DIR/<id>.jsonl, one
history file each. A conversation is active (last record under --idle-after ago), idle,
expired (no record for --ttl), archived (moved to DIR/archive/) or unreadable (not a ctxkit
history, or damaged). Listing checks every line's checksum without parsing it (a version 1
file has none and is shown as not verified) and never takes a file's lock; "open" shows the
pid of a live process that holds the file.

DIR may be a PostgreSQL database instead, postgresql://USER@HOST:PORT/DATABASE (the postgres
extra), where a ReferenceContextManager(store=URL, conversation=ID) keeps its conversations:
the same states (archived conversations are marked, not moved), "open" names the process and
host holding one; a listing reads each one's first and last rows, show checks every row's
checksum. copy moves a conversation between a history file and a database.

DIR defaults to ${ENV_DIR}, else the current directory."""

EPILOG = f"""\
actions:
  list [DIR]                 one line per conversation: id, state, open (pid), last activity, size
  show [DIR] ID              header, state, messages and tokens, checkpoints, audit entries,
                             a torn tail, working state and tasks, the recall memory, and the
                             newest messages
  expire [DIR] [ID ...]      archive every expired conversation, or the named ones now; never
                             deletes, never moves one a process has open
  copy SOURCE DEST           copy one conversation from a history file into a database
                             (DEST: URL or URL#ID) or back (SOURCE: URL#ID, DEST: a file or a
                             directory); read back and checked line by line

examples:
  ctxkit contexts list ~/.agent/history
  {ENV_DIR}=~/.agent/history ctxkit contexts list --archived --json
  ctxkit contexts show ~/.agent/history 7f3a9c --messages 10
  ctxkit contexts expire ~/.agent/history --ttl 7d --dry-run
  ctxkit contexts expire ~/.agent/history 7f3a9c 0be21d
  ctxkit contexts list postgresql://agent@db:5432/agents
  ctxkit contexts copy ~/.agent/history/7f3a9c.jsonl postgresql://agent@db:5432/agents
  ctxkit contexts copy postgresql://agent@db:5432/agents#7f3a9c restored/

durations: 90s, 30m, 24h, 7d.

exit codes: 0 ok; 1 expire skipped a conversation a process has open; 2 bad usage, no such
directory, a database that cannot be reached, unknown id, an unreadable history (show), a copy
refused (source open, destination exists); 3 internal error."""


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """The ``contexts`` subcommand and its actions."""
    parser = commands.add_parser(
        "contexts",
        help="list, show and archive stored conversations (history files)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    parser.set_defaults(run=lambda args: _print_help(parser))
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    raw = argparse.RawDescriptionHelpFormatter

    listing = actions.add_parser(
        "list",
        help="one line per stored conversation",
        usage="ctxkit contexts list [DIR] [--archived] [--json] [--idle-after D] [--ttl D]",
        description=_wrap(
            "One line per conversation in DIR: id, state, open (pid), last activity "
            f"and size. DIR defaults to ${ENV_DIR}, else the current directory."
        ),
        epilog="examples:\n  ctxkit contexts list\n  ctxkit contexts list runs/ --archived\n"
        "  ctxkit contexts list runs/ --json | jq '.conversations[] | select(.open_by)'\n\n"
        "exit codes: 0 ok, 2 no such directory or bad usage.",
        formatter_class=raw,
        parents=[common],
    )
    listing.add_argument("directory", nargs="?", metavar="DIR", help="the storage directory")
    listing.add_argument("--archived", action="store_true", help="include DIR/archive/ too")
    _add_states(listing)
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(run=_run_list)

    show = actions.add_parser(
        "show",
        help="one conversation in full",
        usage="ctxkit contexts show [DIR] ID [--messages N] [--json]",
        description=_wrap(
            "Read one history file in full (without taking its lock): header, state, "
            "messages and tokens of the current history, checkpoints, audit entries, a torn tail, "
            "the working state and tasks, the recall memory beside it, and the newest messages, "
            "one line each. An archived ID is found in DIR/archive/."
        ),
        epilog="examples:\n  ctxkit contexts show 7f3a9c\n"
        "  ctxkit contexts show runs/ 7f3a9c --messages 20\n"
        "  ctxkit contexts show runs/ 7f3a9c --json\n\n"
        "exit codes: 0 ok; 2 no such directory or id, an unreadable history, bad usage.",
        formatter_class=raw,
        parents=[common],
    )
    show.add_argument("names", nargs="+", metavar="ARG", help="[DIR] ID")
    show.add_argument(
        "--messages", type=int, default=5, metavar="N", help="newest messages to show (5)"
    )
    _add_states(show)
    show.add_argument("--json", action="store_true", help="print JSON")
    show.set_defaults(run=_run_show)

    expire = actions.add_parser(
        "expire",
        help="archive expired conversations, or the named ones",
        usage="ctxkit contexts expire [DIR] [ID ...] [--ttl D] [--dry-run] [--json]",
        description=_wrap(
            "Without IDs, move every conversation with no record for --ttl to "
            "DIR/archive/; with IDs, move those now, whatever their age. Nothing is deleted; a "
            "<id>.jsonl.torn moves along; a name already in the archive gets a number. A "
            "conversation a process has open is skipped (its lock is taken for the move, so none "
            "can open it meanwhile). DIR is told from an ID by being a directory or having a '/'."
        ),
        epilog="examples:\n  ctxkit contexts expire --dry-run\n"
        "  ctxkit contexts expire runs/ --ttl 7d\n  ctxkit contexts expire runs/ 7f3a9c 0be21d\n\n"
        "exit codes: 0 ok (or nothing to do), 1 a conversation was skipped because a\n"
        "process has it open, 2 no such directory or id, or bad usage.",
        formatter_class=raw,
        parents=[common],
    )
    expire.add_argument("names", nargs="*", metavar="ARG", help="[DIR] [ID ...]")
    expire.add_argument(
        "--ttl", type=duration, metavar="D", help="archive after this long unused (24h)"
    )
    expire.add_argument("--dry-run", action="store_true", help="say what would move; move nothing")
    expire.add_argument("--json", action="store_true", help="print JSON")
    expire.set_defaults(run=_run_expire)

    copy = actions.add_parser(
        "copy",
        help="copy a conversation between a history file and a database",
        usage="ctxkit contexts copy SOURCE DEST [--json]",
        description=_wrap(
            "Copy one conversation from a history file into a PostgreSQL database (DEST: "
            "URL, the file's name without .jsonl naming it there, or URL#ID) or from a "
            "database into a file (SOURCE: URL#ID; DEST: a new file, or a directory for "
            "ID.jsonl). The source's lock is held while it is read, so no manager writes "
            "meanwhile; every record is copied as it is (checksum and token counts); the "
            "destination is written whole or not at all, never over one that exists, and read "
            "back and compared line by line. The recall memory is not copied: a manager "
            "rebuilds it on opening."
        ),
        epilog="examples:\n  ctxkit contexts copy runs/7f3a9c.jsonl postgresql://agent@db/agents\n"
        "  ctxkit contexts copy runs/7f3a9c.jsonl 'postgresql://agent@db/agents#support-7f3a9c'\n"
        "  ctxkit contexts copy 'postgresql://agent@db/agents#7f3a9c' restored/\n\n"
        "exit codes: 0 copied and checked; 2 bad usage, a source open by a manager, damaged or\n"
        "missing, a destination that exists, a database that cannot be reached.",
        formatter_class=raw,
        parents=[common],
    )
    copy.add_argument("source", metavar="SOURCE", help="a history file, or URL#ID")
    copy.add_argument("destination", metavar="DEST", help="URL[#ID], or a file or directory")
    copy.add_argument("--json", action="store_true", help="print JSON")
    copy.set_defaults(run=_run_copy)


def _wrap(text: str) -> str:
    """A description as paragraphs of the width the other subcommands use."""
    return textwrap.fill(text, width=88)


def _add_states(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--idle-after", type=duration, default="5m", metavar="D", help="idle after (5m)"
    )
    parser.add_argument("--ttl", type=duration, default="24h", metavar="D", help="expired (24h)")


def _print_help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return EXIT_OK


# -- where -------------------------------------------------------------------------------------


def _directory(given: str | None) -> Path | str:
    """The storage directory, or a database's URL (checked, not yet reached)."""
    from ctxkit.reference.postgres.connection import check_url, is_database_url

    source = ""
    if given is None:
        given = os.environ.get(ENV_DIR) or "."
        source = f" (from ${ENV_DIR})" if os.environ.get(ENV_DIR) else ""
    if is_database_url(given):
        try:
            check_url(given)
        except ValueError as error:
            raise UsageError(f"{error}{source}") from None
        return given
    path = Path(given).expanduser()
    if not path.is_dir():
        raise UsageError(f"no such directory: {path}{source}")
    return path


def _looks_like_directory(text: str) -> bool:
    from ctxkit.reference.postgres.connection import is_database_url

    return is_database_url(text) or "/" in text or text in (".", "..", "~") or Path(text).is_dir()


@contextlib.contextmanager
def _said_as_usage() -> Iterator[None]:
    """A database that cannot be reached, a refused copy, a bad connection string: the
    user's to fix, said in one sentence (exit 2)."""
    from ctxkit.reference.journal import HistoryFileError
    from ctxkit.reference.lifecycle import UnknownConversation

    try:
        yield
    except (HistoryFileError, UnknownConversation, ValueError) as error:
        raise UsageError(str(error)) from None


# -- list --------------------------------------------------------------------------------------


def _run_list(args: argparse.Namespace) -> int:
    from ctxkit.reference import lifecycle
    from ctxkit.reference.postgres import lifecycle as in_database

    directory = _directory(args.directory)
    now = time.time()
    scan = in_database.scan if isinstance(directory, str) else lifecycle.scan
    with _said_as_usage():
        found = scan(
            directory, now=now, idle_after=args.idle_after, ttl=args.ttl, archived=args.archived
        )
    where = _shown(directory)
    if args.json:
        report = {
            "directory": where,
            "now": now,
            "idle_after_s": args.idle_after,
            "ttl_s": args.ttl,
            "conversations": [_with_age(c.as_dict(), now) for c in found],
        }
        print(json.dumps(report, indent=2))
        return EXIT_OK
    if not found:
        print(f"no stored conversations in {where}")
        return EXIT_OK
    print_table(
        ["ID", "STATE", "OPEN", "LAST ACTIVITY", "SIZE"],
        [
            [
                c.id,
                c.state,
                "-" if c.open_by is None else str(c.open_by),
                _age(now, c.last_activity),
                _size(c.size_bytes),
            ]
            for c in found
        ],
        right={4},
    )
    for c in found:
        if c.reason:
            print(f"  {c.id}: {c.reason}")
        elif not c.verified and not isinstance(directory, str):  # a database's: see show
            print(f"  {c.id}: not verified (a version 1 history has no checksums)")
    counts: dict[str, int] = {}
    for c in found:
        counts[c.state] = counts.get(c.state, 0) + 1
    summary = ", ".join(f"{n} {state}" for state, n in counts.items())
    print(f"{len(found)} in {where}: {summary}")
    return EXIT_OK


def _shown(directory: Path | str) -> str:
    """A directory, or a database's URL without its password."""
    from ctxkit.reference.postgres.connection import display_url

    return display_url(directory) if isinstance(directory, str) else str(directory)


# -- show --------------------------------------------------------------------------------------


def _run_show(args: argparse.Namespace) -> int:
    from ctxkit.reference.journal import HistoryFileError
    from ctxkit.reference.lifecycle import UnknownConversation, details, examine, find

    if len(args.names) > 2:
        raise UsageError("show takes [DIR] ID: one conversation at a time")
    if len(args.names) == 1 and _looks_like_directory(args.names[0]):
        raise UsageError(f"which conversation in {args.names[0]}? ctxkit contexts show DIR ID")
    if args.messages < 0:
        raise UsageError(f"--messages must be >= 0, got {args.messages}")
    directory = _directory(args.names[0] if len(args.names) == 2 else None)
    name = args.names[-1]
    now = time.time()
    if isinstance(directory, str):
        from ctxkit.reference.postgres import lifecycle as in_database

        with _said_as_usage():
            info = in_database.details(directory, name, newest=args.messages)
            (found,) = in_database.scan(
                directory, now=now, idle_after=args.idle_after, ttl=args.ttl, names=[name]
            )
        info = {"state": found.state, "open_by": found.open_by, **info}
        if args.json:
            print(json.dumps(_with_age(info, now), indent=2))
        else:
            _print_details(info, now)
        return EXIT_OK
    try:
        path = find(directory, name, archived=True)
        found = examine(
            path,
            now=now,
            idle_after=args.idle_after,
            ttl=args.ttl,
            archived=path.parent != directory,
        )
        info = details(path, newest=args.messages)
    except UnknownConversation as error:
        raise UsageError(str(error)) from None
    except FileNotFoundError:
        raise UsageError(f"{name!r} was moved or removed while being read") from None
    except HistoryFileError as error:
        raise UsageError(str(error)) from None
    info = {"state": found.state, "open_by": found.open_by, **info}
    if args.json:
        print(json.dumps(_with_age(info, now), indent=2))
        return EXIT_OK
    _print_details(info, now)
    return EXIT_OK


def _print_details(info: dict[str, Any], now: float) -> None:
    by = info["open_by"]
    opened = (
        "not open" if by is None else f"open by {by if isinstance(by, str) else f'process {by}'}"
    )
    print(f"{info['id']}  {info['state']}, {opened}")
    rows = [
        ("path", info["path"]),
        ("conversation", info["conversation_id"] or "-"),
        ("encoding", info["encoding"] or "-"),
        ("created", _when(now, info["created"])),
        ("last activity", _when(now, info["last_activity"])),
        ("size", f"{_size(info['size_bytes'])}, {_records(info['records'])}"),
        ("history", f"{info['messages']:,} messages, {info['tokens']:,} tokens"),
        ("checkpoints", str(len(info["checkpoints"])) if info["checkpoints"] else "none"),
    ]
    for point in info["checkpoints"]:
        label = f" {json.dumps(point['label'])}" if point["label"] is not None else ""
        rows.append(
            ("", f"{point['id']}{label}: {point['messages']} messages, {_age(now, point['at'])}")
        )
    rows.append(("audit", f"{info['audit_entries']} entries"))
    torn = info["torn"]
    rows.append(
        (
            "torn tail",
            "none"
            if torn is None
            else f"line {torn['line']} (byte {torn['offset']}, {torn['length']} bytes) "
            f"{torn['reason']}: a write cut short, skipped",
        )
    )
    if info["set_aside"]:
        rows.append(("set aside", info["set_aside"]))
    rows += _work_rows(info, now)
    print_table(("", ""), rows, show_header=False, indent=2)
    newest = info["newest"]
    if newest:
        print(f"newest {len(newest)} of {info['messages']:,} messages")
        print_table(
            ("#", "role", "tokens", "preview"),
            [(f"#{r['index']}", r["role"], f"{r['tokens']:,}", r["preview"]) for r in newest],
            right={2},
            show_header=False,
            indent=2,
        )


STATE_CHARS = 160
"""The working state is shown on one line up to this long (``--json`` shows it all)."""
TASKS_SHOWN = 10
"""Active and completed tasks shown each, newest last (``--json`` shows them all)."""


def _work_rows(info: dict[str, Any], now: float) -> list[tuple[str, str]]:
    """The working state on one line, the tasks one a line, and the recall memory."""
    state = info["working_state"]
    text = json.dumps(state, ensure_ascii=False, separators=(", ", ": ")) if state else "none"
    if len(text) > STATE_CHARS:
        text = f"{text[: STATE_CHARS - 1]}… ({len(text):,} characters; --json shows it all)"
    active, completed = info["active_tasks"], info["completed_tasks"]
    rows = [
        ("working state", text),
        (
            "tasks",
            f"{len(active)} active, {len(completed)} completed" if active or completed else "none",
        ),
    ]
    for tasks, done in ((active, False), (completed, True)):
        if len(tasks) > TASKS_SHOWN:
            rows.append(
                ("", f"... {len(tasks) - TASKS_SHOWN} older {'completed' if done else 'active'}")
            )
        for task in tasks[-TASKS_SHOWN:]:
            when = (
                f"completed {_age(now, task['completed'])}"
                if done
                else f"added {_age(now, task['created'])}"
            )
            rows.append(
                ("", f"{task['id']} [{'x' if done else ' '}] {_one_line(task['text'])} ({when})")
            )
    rows.append(("memory", info["memory"] or "none"))
    return rows


def _one_line(text: str, width: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _records(records: dict[str, int]) -> str:
    total = sum(records.values())
    if not total:
        return "no records"
    parts = ", ".join(f"{op} {n}" for op, n in records.items())
    return f"{total} records ({parts})"


# -- expire ------------------------------------------------------------------------------------


def _run_expire(args: argparse.Namespace) -> int:
    from ctxkit.durations import format_duration
    from ctxkit.reference.lifecycle import DEFAULT_TTL, UnknownConversation, cleanup

    names = list(args.names)
    given = names.pop(0) if names and _looks_like_directory(names[0]) else None
    directory = _directory(given)
    if names and args.ttl is not None:
        raise UsageError("--ttl only applies without IDs (named conversations move now)")
    ttl = DEFAULT_TTL if args.ttl is None else args.ttl
    if isinstance(directory, str):
        from ctxkit.reference.postgres import lifecycle as in_database

        cleanup = in_database.cleanup  # type: ignore[assignment]
    try:
        with _said_as_usage():
            actions = cleanup(directory, ttl=ttl, ids=names or None, dry_run=args.dry_run)  # type: ignore[arg-type]
    except UnknownConversation as error:
        raise UsageError(str(error)) from None
    if args.json:
        report = {
            "directory": _shown(directory),
            "dry_run": args.dry_run,
            "ttl_s": None if names else ttl,
            "actions": [action.as_dict() for action in actions],
        }
        print(json.dumps(report, indent=2))
    elif not actions:
        unused = format_duration(ttl)
        print(f"nothing to archive: no conversation in {_shown(directory)} unused for {unused}")
    else:
        for action in actions:
            print(action.describe())
    return EXIT_SKIPPED_OPEN if any(action.open for action in actions) else EXIT_OK


# -- copy --------------------------------------------------------------------------------------


def _run_copy(args: argparse.Namespace) -> int:
    from ctxkit.reference.postgres.lifecycle import copy_conversation

    with _said_as_usage():
        copied = copy_conversation(args.source, args.destination)
    if args.json:
        print(
            json.dumps(
                {
                    "source": copied.source,
                    "destination": copied.destination,
                    "records": copied.records,
                    "messages": copied.messages,
                    "verified": copied.verified,
                },
                indent=2,
            )
        )
    else:
        print(copied.describe())
    return EXIT_OK


# -- formats -----------------------------------------------------------------------------------


def _with_age(data: dict[str, Any], now: float) -> dict[str, Any]:
    last = data.get("last_activity")
    data["age_s"] = None if last is None else now - last
    return data


def _age(now: float, then: float | None) -> str:
    from ctxkit.durations import format_age

    return "-" if then is None else format_age(now - then)


def _when(now: float, then: float | None) -> str:
    if then is None:
        return "-"
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(then))
    return f"{stamp} ({_age(now, then)})"


def _size(size: int) -> str:
    value, unit = float(size), "B"
    for bigger in ("KiB", "MiB", "GiB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
