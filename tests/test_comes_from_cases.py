"""The language-neutral "comes from" cases (conformance/comes_from.json), run through the Python
suite: every rule has cases, and every case gives its stated answer."""

from __future__ import annotations

from typing import Any

import pytest

from ctxkit.conformance.judge.catalogue import catalogue
from ctxkit.conformance.judge.comes_from import (
    ALWAYS_IGNORED,
    ANNOTATION_KEYS,
    HistoryIndex,
    comes_from,
    equivalent,
    match_view,
)
from ctxkit.conformance.judge.invariants import check_ordering, check_preservation

CASES = catalogue("comes_from.json")
GROUPS = ("equivalent", "comes_from", "matching", "preservation", "ordering")


def cases(group: str) -> Any:
    return pytest.mark.parametrize("case", CASES[group], ids=lambda c: c["description"])


def test_the_catalogue_names_the_keys_python_ignores_and_every_rule_has_cases():
    assert frozenset(CASES["annotation_keys"]) == ANNOTATION_KEYS
    assert frozenset(CASES["always_ignored"]) == ALWAYS_IGNORED
    rules = [r["id"] for r in CASES["rules"]]
    assert len(rules) == len(set(rules))
    used = {case["rule"] for group in GROUPS for case in CASES[group]}
    assert used == set(rules)
    descriptions = [case["description"] for group in GROUPS for case in CASES[group]]
    assert len(descriptions) == len(set(descriptions))


@cases("equivalent")
def test_equivalent(case):
    first, second = case["first"], case["second"]
    assert equivalent(first, second) is case["equivalent"]
    assert equivalent(second, first) is case["equivalent"]
    if case["equivalent"]:  # equivalent messages come from each other
        assert comes_from(first, second)
        assert comes_from(second, first)


@cases("comes_from")
def test_comes_from(case):
    assert comes_from(case["view"], case["history"]) is case["comes_from"]


@cases("matching")
def test_matching(case):
    history, view = case["history"], case["view"]
    assert match_view(history, view) == case["matches"]
    index = HistoryIndex()
    for message in history:
        index.append(message)
    assert index.match(view) == case["matches"]
    prints = [index.fingerprint(m) for m in view]
    assert index.match(view, prints) == case["matches"]


@cases("preservation")
def test_preservation(case):
    found = check_preservation(case["history"], case["view"])
    assert [v.kind for v in found] == case["kinds"], [v.message for v in found]
    assert all(v.property == "preservation" for v in found)


@cases("ordering")
def test_ordering(case):
    found = check_ordering(case["history"], case["view"])
    assert [v.kind for v in found] == case["kinds"], [v.message for v in found]
    assert all(v.property == "ordering" for v in found)
