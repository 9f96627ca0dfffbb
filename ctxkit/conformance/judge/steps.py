"""What a run did to the manager, as data: the calls it made and the check that failed.

The state machine records these as it goes;
:mod:`ctxkit.conformance.reports.reproducer` renders them as a reproducer script, so the
script says exactly what the run did, and nothing is written as code
until it is rendered (the renderer alone decides what valid Python looks like).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Call", "Check", "Request"]


@dataclass(frozen=True)
class Request:
    """How a view was asked for: with a token budget, through a provider's defaults, or with
    neither (the manager's own fallback)."""

    token_budget: int | None = None
    defaults: dict[str, Any] | None = None

    @property
    def args(self) -> dict[str, Any]:
        """The protocol's ``view`` arguments."""
        return {"token_budget": self.token_budget, "provider": self.defaults}

    def describe(self) -> str:
        """The call's arguments as a person reads them: ``token_budget=120``,
        ``provider=...``, or nothing."""
        if self.defaults is not None:
            return "provider=..."
        if self.token_budget is not None:
            return f"token_budget={self.token_budget}"
        return ""

    def origin(self) -> str:
        """Where the budget came from, when it was not given as ``token_budget``."""
        if self.defaults is not None:
            window = self.defaults.get("context_window")
            output = self.defaults.get("max_output_tokens", 0)
            return (
                f" (the budget came from provider=: context_window {window} - "
                f"max_output_tokens {output})"
            )
        if self.token_budget is None:
            return (
                " (the request named no budget and no provider: the manager's fallback, "
                "--budget or the config's max_tokens)"
            )
        return ""


Op = Literal[
    "add",
    "add_then_edit",
    "add_concurrently",
    "add_bad",
    "request",
    "request_then_edit",
    "get_then_edit",
    "set",
    "set_then_edit",
    "clear",
]


@dataclass(frozen=True)
class Call:
    """One call on the manager.

    ``value``: the message (``add``, ``add_then_edit``, ``add_bad``), the list of messages
    (``add_concurrently``, ``set``, ``set_then_edit``) or the :class:`Request`.
    ``tolerated``: the call raised in the run and that was fair (a request under a budget
    too small for what must stay): the script lets it raise.
    ``note``: what is wrong with a bad message (``add_bad``).
    ``timeout``: the call did not return within this many seconds in the run.
    ``name``: the variable a request's view goes into (``view``; ``again`` for a repeat).
    """

    op: Op
    value: Any = None
    tolerated: bool = False
    note: str = ""
    timeout: float | None = None
    name: str = "view"

    def as_data(self) -> dict[str, Any]:
        """The call as JSON data, for reports and tools that replay it in other terms (an
        upstream bug report in a library's own types)."""
        value = self.value.args if isinstance(self.value, Request) else self.value
        return {"op": self.op, "value": value, "tolerated": self.tolerated}

    def request(self) -> tuple[str, dict[str, Any]]:
        """The protocol request that makes this call, and its arguments."""
        edit = {"edit_after": True} if self.op.endswith("_then_edit") else {}
        if self.op in ("add", "add_then_edit", "add_bad"):
            return "add", {"message": self.value, **edit}
        if self.op == "add_concurrently":
            return "add_many", {"messages": self.value}
        if self.op in ("set", "set_then_edit"):
            return "set", {"messages": self.value, **edit}
        if self.op in ("request", "request_then_edit"):
            return "view", {**self.value.args, **edit}
        if self.op == "get_then_edit":
            return "get", edit
        return self.op, {}


CheckKind = Literal[
    "raises",  # the last call raised on valid input (the script fails there by itself)
    "returns",  # the last call did not return within the timeout
    "crashes",  # the last call ended the target's process
    "is_list",  # the last view is a list of messages
    "tool_pairs",
    "attachments",  # reasoning items and thinking blocks kept with their calls
    "ordering",
    "preserved",
    "fits",
    "history",  # get_messages() equals the expected list
    "stored_all",  # after concurrent adds: the expected list, then every message added
    "empty_view",
    "same_view",  # asking again gives the same view
    "not_edited",  # asking again shows none of the caller's edits
    "refuses",  # the last call (a bad message) must raise
    "events",
]


@dataclass(frozen=True)
class Check:
    """The assertion that fails after the calls. ``args`` are plain data for the renderer:
    ``history`` (the messages as added), ``allow`` (relaxations in force), ``ignore``
    (annotation keys), ``budget``, ``tolerance``, ``request`` (a :class:`Request`),
    ``events``, ``added``, ``property``."""

    kind: CheckKind
    args: dict[str, Any] = field(default_factory=dict)
