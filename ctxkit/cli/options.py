"""Parsing and checking what the user typed, shared by the commands.

Imports nothing of ctxkit above :mod:`ctxkit.cli.errors`, so any command module may use it.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from ctxkit.cli.errors import UsageError

__all__ = [
    "DEFAULT_SEED",
    "Parser",
    "check_seconds",
    "check_writable_file",
    "check_writable_folder",
    "config_from_json",
    "duration",
    "finite",
    "memory_limit",
    "shape_list",
]

DEFAULT_SEED = 1
"""The seed of every command that draws at random (usage, demo, inspect --demo, survey,
conformance), so that the same command shows the same conversation and gives the same
verdict; ``conformance --seed random`` explores."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser that names a mistyped option and the one meant, under the usage of
    the command it was given to, exit 2: ``ctxkit conformance --profle quick`` says "unknown
    option --profle; did you mean --profile?". Plain argparse hands what a subcommand does
    not know up to the top-level parser, which prints its own usage and "unrecognized
    arguments". A mistyped choice (a command, a ``--profile``) gets a suggestion too.
    ``add_subparsers`` makes its parsers of the parser's class, so every command is one."""

    topics: dict[str, str]
    """Longer help, by topic name: ``ctxkit help COMMAND TOPIC`` prints one; ``--help``
    names them."""
    advanced: frozenset[str] = frozenset()
    """Options ``--help`` leaves out, to fit a screen: ``ctxkit help COMMAND options`` lists
    every option."""

    def with_topics(self, topics: dict[str, str], advanced: Sequence[str] = ()) -> None:
        """Give the command its topics and the options only ``help COMMAND options`` shows;
        ``--help`` ends by naming them."""
        self.topics = dict(topics)
        self.advanced = frozenset(advanced)
        names = ", ".join([*self.topics, *(["options"] if advanced else [])])
        command = self.prog.removeprefix("ctxkit ").strip()
        more = f"more: ctxkit help {command} TOPIC (topics: {names})"
        self.epilog = f"{self.epilog.rstrip()}\n\n{more}" if self.epilog else more

    def format_help(self, *, every_option: bool = False) -> str:
        """The help, without the :attr:`advanced` options unless ``every_option``."""
        hidden = (
            []
            if every_option
            else [a for a in self._actions if set(a.option_strings) & self.advanced]
        )
        kept = [(action, action.help) for action in hidden]
        for action in hidden:
            action.help = argparse.SUPPRESS
        try:
            return super().format_help()
        finally:
            for action, text in kept:
                action.help = text

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(self._unknown(extras))
        return parsed, extras

    def error(self, message: str) -> NoReturn:
        """argparse's error, with the closest choice suggested for an invalid one."""
        found = _INVALID_CHOICE.search(message)
        if found:
            choices = [c.strip().strip("'\"") for c in found["choices"].split(",")]
            close = difflib.get_close_matches(found["value"], choices, n=1)
            if close:
                message += f"; did you mean {close[0]!r}?"
        super().error(message)

    def _unknown(self, extras: list[str]) -> str:
        options = [e for e in extras if e.startswith("-") and e != "-"]
        if not options:
            return f"unrecognized arguments: {' '.join(extras)}"
        name = options[0].partition("=")[0]
        known = [o for o in self._option_string_actions if o.startswith("--")]
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else f"; see {self.prog} --help"
        more = f" (and {len(options) - 1} more)" if len(options) > 1 else ""
        return f"unknown option {name}{more}{hint}"


_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<value>[^']*)' \(choose from (?P<choices>.*)\)")
"""argparse's sentence for a value not among the choices (quoted or not, as versions write
them)."""


def shape_list(text: str) -> tuple[str, ...]:
    """``--shapes``: shapes, comma-separated, or ``all``; ``both`` is openai,anthropic."""
    from ctxkit.shapes.spoken import ShapeError, parse_shapes  # at parse time: --help stays fast

    try:
        return parse_shapes(text, "--shapes")
    except ShapeError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--shapes: ")) from None


def config_from_json(text: str) -> dict[str, Any]:
    """The ``--config JSON`` option of a subcommand: a JSON object of keyword arguments."""
    try:
        config = json.loads(text)
    except ValueError as exc:  # JSONDecodeError, or an integer past Python's digit limit
        raise UsageError(f"--config is not valid JSON: {exc}") from exc
    except RecursionError:
        raise UsageError("--config nests too deeply to be keyword arguments") from None
    if not isinstance(config, dict):
        raise UsageError("""--config must be a JSON object, e.g. '{"max_tokens": 8000}'""")
    return config


def finite(text: str) -> float:
    """An argparse type: a finite number (``nan`` and ``inf`` parse as floats, and would
    make a run endless or meaningless)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def check_seconds(option: str, value: float) -> None:
    """Refuse a time that is not a positive, finite number of seconds (``nan`` and ``inf``
    parse as floats, and would make a run endless or meaningless)."""
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"{option} must be a positive number of seconds, got {value}")


def duration(text: str) -> float:
    """An argparse type: ``90s``, ``30m``, ``24h``, ``7d`` in seconds."""
    from ctxkit.durations import parse_duration

    try:
        return parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def check_writable_file(option: str, path: Path) -> None:
    """Refuse an output file that cannot be written, before the work, not after it: its
    folder must exist (a mistyped folder is said, not silently created); a new file is
    created and removed again, so the check is the operating system's own answer."""
    if path.is_dir():
        raise UsageError(f"{option} {path}: is a directory; name a file")
    folder = path.parent
    if not folder.exists():
        raise UsageError(f"{option} {path}: no folder {folder}; create it first")
    if not folder.is_dir():
        raise UsageError(f"{option} {path}: {folder} is not a folder")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise UsageError(f"{option} {path}: the file is not writable")
        return
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except FileExistsError:  # created meanwhile: someone else's to judge
        return
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot write there: {exc.strerror}") from None
    path.unlink()


def check_writable_folder(option: str, folder: Path) -> None:
    """Create an output folder if needed, or refuse one that cannot be written."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{option} {folder} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{option} {folder} cannot be created: {exc.strerror}") from None
    if not os.access(folder, os.W_OK):
        raise UsageError(f"{option} {folder} is not writable")


MIN_MEMORY_LIMIT = 64 << 20
"""The least address space Python starts in."""


def memory_limit(text: str) -> int:
    """An argparse type: ``--memory-limit`` in bytes (``2G``, ``512M``); 0 for no cap."""
    from ctxkit.conformance.targets.sandbox import format_size, parse_size

    try:
        size = parse_size(text) or 0
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if 0 < size < MIN_MEMORY_LIMIT:
        raise argparse.ArgumentTypeError(
            f"{text!r} ({format_size(size)}) is too little to start Python; give at least "
            f"{format_size(MIN_MEMORY_LIMIT)}, or 0 or none for no cap"
        )
    return size
