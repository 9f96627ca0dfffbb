"""The quick start's commands as a user copies them, from the README or a docs page."""

from __future__ import annotations

import re
from pathlib import Path

from tests.processes import ROOT


def quick_start_commands(page: Path = ROOT / "README.md") -> tuple[str, str]:
    """The two shell commands of a page's "Quick start" section: the quick start, then the
    project's own tests."""
    text = page.read_text(encoding="utf-8")
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)\n```", section, flags=re.DOTALL)
    assert len(blocks) == 2, f"{page.name}: the quick start has two commands, found {blocks}"
    return blocks[0].strip(), blocks[1].strip()
