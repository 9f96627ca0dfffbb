"""How commands print tables: Rich, laid out the same on a terminal and in a pipe.

A table is a :class:`rich.table.Table` without borders, so ``ctxkit contexts list | grep``
and a test's captured stdout read it as words and columns. Off a terminal there are no
colour codes (whatever ``FORCE_COLOR`` says), no width limit (a pipe gets whole lines, never
wrapped at 80 columns) and no padding after the last cell. On a terminal the header is bold
and Rich fits the table to the window.

Imports nothing of ctxkit above :mod:`ctxkit.cli.errors`, so any command module may use it;
Rich is imported when a table is printed.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["console", "print_table"]

PIPE_WIDTH = 10_000
"""The width a table may take off a terminal: any line a command prints fits."""


def console(file: TextIO | None = None) -> Console:
    """A Rich console on ``file`` (stdout when None, looked up now, so a redirected stdout
    is the one written to): the terminal's when it is one, else plain and wide."""
    from rich.console import Console

    stream = sys.stdout if file is None else file
    if _is_terminal(stream):
        return Console(file=stream, highlight=False)
    return Console(
        file=stream,
        force_terminal=False,
        color_system=None,
        width=PIPE_WIDTH,
        highlight=False,
    )


def print_table(
    header: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    right: Collection[int] = (),
    show_header: bool = True,
    indent: int = 0,
    file: TextIO | None = None,
) -> None:
    """Print ``rows`` under ``header`` in aligned columns two spaces apart; the columns whose
    index is in ``right`` are right-justified (figures). Cells are text, never markup."""
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, show_header=show_header, header_style="bold", pad_edge=False)
    for index, name in enumerate(header):
        last = index == len(header) - 1
        # On a narrow terminal the last column wraps; the others keep their figures whole.
        table.add_column(name, justify="right" if index in right else "left", no_wrap=not last)
    for row in rows:
        table.add_row(*(cell if isinstance(cell, Text) else Text(str(cell)) for cell in row))
    out = console(file)
    shown = Padding(table, (0, 0, 0, indent)) if indent else table
    if out.is_terminal:
        out.print(shown)
        return
    with out.capture() as captured:
        out.print(shown)
    stream = sys.stdout if file is None else file
    for line in captured.get().splitlines():
        stream.write(line.rstrip() + "\n")


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or bare stream
        return False
