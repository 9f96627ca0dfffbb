"""A conversation's working state and tasks (AdCP's ``working_state``, ``active_tasks`` and
``completed_tasks``): what an agent is doing, kept beside its history.

``working_state`` is one free-form JSON object (current items, the last search, preferences,
the workflow step...), replaced whole or changed by a JSON merge patch (RFC 7386: a key set to
null goes, an object merges into an object, anything else replaces). A task is
``{"id": "t3", "text": ..., "created": t, "completed": t | None}``; ids are never reused in a
conversation, even after a restore.

With a history file, every change is one record written (and synced, as the history's
``fsync`` says) before it is made, so what a call acknowledged survives a crash, and a crash
mid-write leaves the change out whole (:mod:`ctxkit.reference.journal`)::

    {"op": "state", "at": t, "state": {...}}                         # the new state, whole
    {"op": "task", "at": t, "action": "add", "task": {"id", "text", "created"}}
    {"op": "task", "at": t, "action": "complete", "id": "t3"}

A checkpoint names them with the history, a restore sets them back with it, ``clear()`` empties
them with it; the file replays to the same state. They leave with the history file when it
expires (:func:`ctxkit.reference.lifecycle.cleanup`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxkit.reference.journal import HistoryFileCorrupt

__all__ = ["TaskError", "WorkingState", "merge_patch"]


class TaskError(LookupError):
    """No active task has this id (never added, or completed already)."""

    def __str__(self) -> str:
        return str(self.args[0])


def merge_patch(target: Any, patch: Any) -> Any:
    """``target`` changed by the JSON merge patch ``patch`` (RFC 7386), as a new value; the
    inputs are not changed."""
    if not isinstance(patch, Mapping):
        return _copy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _copy(value: Any) -> Any:
    return json.loads(json.dumps(value)) if isinstance(value, dict | list) else value


def json_object(value: Any, what: str) -> dict[str, Any]:
    """``value`` as a new JSON object, or :class:`TypeError` saying what is wrong."""
    if not isinstance(value, Mapping):
        raise TypeError(f"{what} must be a JSON object (a mapping), got {type(value).__name__}")
    try:
        text = json.dumps(dict(value), allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must be JSON: {exc}") from None
    copied = json.loads(text)
    if not isinstance(copied, dict):  # pragma: no cover - a mapping dumps as an object
        raise TypeError(f"{what} must be a JSON object")
    return copied


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The working state and tasks at one point (shared, never changed)."""

    state: dict[str, Any]
    tasks: tuple[dict[str, Any], ...]


class WorkingState:
    """The working state and tasks of one conversation, and their state at each checkpoint.

    ``write``: appends one record durably before a change is made (the manager's history
    file), raising to stop the change; None keeps everything in memory.
    """

    def __init__(self, write: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.write = write
        self._now = Snapshot({}, ())
        self._points: dict[str, Snapshot] = {}
        self._added = 0
        """Tasks ever added: the next id is ``t{_added + 1}``, whatever was restored."""

    # -- reading -----------------------------------------------------------------------------

    @property
    def state(self) -> dict[str, Any]:
        """A copy of the working state."""
        return _copy(self._now.state)

    def tasks(self) -> dict[str, list[dict[str, Any]]]:
        """``active_tasks`` and ``completed_tasks``, oldest first (copies)."""
        tasks = [dict(task) for task in self._now.tasks]
        return {
            "active_tasks": [task for task in tasks if task["completed"] is None],
            "completed_tasks": [task for task in tasks if task["completed"] is not None],
        }

    def as_dict(self) -> dict[str, Any]:
        """``working_state``, ``active_tasks`` and ``completed_tasks``, as AdCP names them."""
        return {"working_state": self.state, **self.tasks()}

    # -- changing ----------------------------------------------------------------------------

    def replace(self, state: Mapping[str, Any], at: float) -> dict[str, Any]:
        """Make ``state`` the working state; returns it (a copy)."""
        new = json_object(state, "working_state")
        self._apply({"op": "state", "at": at, "state": new})
        return self.state

    def patch(self, patch: Mapping[str, Any], at: float) -> dict[str, Any]:
        """Apply a JSON merge patch (RFC 7386) to the working state; returns the result."""
        checked = json_object(patch, "a working_state merge patch")
        return self.replace(merge_patch(self._now.state, checked), at)

    def add_task(self, text: str, at: float) -> dict[str, Any]:
        """Add an active task; returns it."""
        if not isinstance(text, str) or not text.strip():
            raise TypeError(f"a task's text must be a non-empty string, got {text!r}")
        task = {"id": f"t{self._added + 1}", "text": text, "created": at, "completed": None}
        self._apply({"op": "task", "at": at, "action": "add", "task": _added_task(task)})
        return dict(task)

    def complete_task(self, task_id: str, at: float) -> dict[str, Any]:
        """Mark an active task completed; returns it. Raises :class:`TaskError` for an id
        that names no active task."""
        self._active(task_id)
        self._apply({"op": "task", "at": at, "action": "complete", "id": task_id})
        return next(dict(task) for task in self._now.tasks if task["id"] == task_id)

    def clear(self) -> None:
        """Forget the working state and tasks (the history was cleared; already recorded)."""
        self._now = Snapshot({}, ())

    # -- checkpoints -------------------------------------------------------------------------

    def checkpointed(self, checkpoint_id: str) -> None:
        """Name the working state and tasks as they are now (already recorded)."""
        self._points[checkpoint_id] = self._now

    def restored(self, checkpoint_id: str) -> None:
        """Set them back to a checkpoint's (already recorded); a checkpoint from before they
        were kept holds none."""
        self._now = self._points.get(checkpoint_id, Snapshot({}, ()))

    # -- replaying a history file ------------------------------------------------------------

    def replay(self, path: Path, records: list[dict[str, Any]]) -> None:
        """Rebuild from a history file's records (writing nothing). Raises
        :class:`~ctxkit.reference.journal.HistoryFileCorrupt` for a bad record."""
        for number, record in enumerate(records, start=2):
            op = record.get("op")
            try:
                if op == "state" or op == "task":
                    at = record["at"]
                    if isinstance(at, bool) or not isinstance(at, int | float):
                        raise ValueError(f"has time {at!r}, not a number")
                    self._change(record)
                elif op == "checkpoint":
                    self.checkpointed(record["id"])
                elif op == "restore":
                    self.restored(record["id"])
                elif op == "clear":
                    self.clear()
            except (KeyError, TypeError, ValueError, TaskError) as exc:
                reason = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
                raise HistoryFileCorrupt.at_line(
                    path, number, f"is a bad {op!r} record: {reason}"
                ) from None

    # -- internals ---------------------------------------------------------------------------

    def _active(self, task_id: Any) -> None:
        for task in self._now.tasks:
            if task["id"] == task_id:
                if task["completed"] is not None:
                    raise TaskError(f"task {task_id!r} is completed already")
                return
        active = [task["id"] for task in self._now.tasks if task["completed"] is None]
        raise TaskError(f"no task {task_id!r}; active: {', '.join(active) if active else 'none'}")

    def _apply(self, record: dict[str, Any]) -> None:
        """Write the record, then make the change: a failed write changes nothing."""
        if self.write is not None:
            self.write(record)
        self._change(record)

    def _change(self, record: dict[str, Any]) -> None:
        if record["op"] == "state":
            state = record["state"]
            if not isinstance(state, dict):
                raise ValueError("has a state that is not an object")
            self._now = Snapshot(state, self._now.tasks)
        elif record["action"] == "add":
            task = record["task"]
            if not isinstance(task, dict) or not isinstance(task.get("id"), str):
                raise ValueError("has a task that is not an object with an id")
            if not isinstance(task.get("text"), str) or not _number(task.get("created")):
                raise ValueError("has a task without text or creation time")
            added = {**task, "completed": None}
            self._now = Snapshot(self._now.state, (*self._now.tasks, added))
            self._added += 1
        elif record["action"] == "complete":
            task_id = record["id"]
            self._active(task_id)
            at = record["at"]
            self._now = Snapshot(
                self._now.state,
                tuple(
                    {**task, "completed": at} if task["id"] == task_id else task
                    for task in self._now.tasks
                ),
            )
        else:
            raise ValueError(f"has unknown action {record['action']!r}")


def _added_task(task: dict[str, Any]) -> dict[str, Any]:
    return {key: task[key] for key in ("id", "text", "created")}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
