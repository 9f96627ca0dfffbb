"""Tests for ctxkit.tokens: exact offline tiktoken counts and the chat-format cost model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxkit
from ctxkit import tokens
from ctxkit.tokens import (
    CALL_OVERHEAD,
    CATEGORIES,
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD,
    REPLY_PRIMING,
    RESULT_OVERHEAD,
    Chars4Estimator,
    EncodingUnavailable,
    TokenCounter,
    load_encoding,
)
from tests.hostile import spoiled_histories

CJK = "你好世界。这是一个关于上下文窗口管理的测试句子。我们需要精确的令牌计数。"


@cache
def counter(encoding: str = "o200k_base") -> TokenCounter:
    return TokenCounter(encoding)


@pytest.fixture
def fresh_encoding_cache():
    """Clear the encodings cache before and after, so a patched load never leaks."""
    tokens._load_encoding.cache_clear()
    try:
        yield
    finally:
        tokens._load_encoding.cache_clear()


# --------------------------------------------------------------------------- text strategies

pieces = st.one_of(
    st.text(max_size=30),
    st.text(alphabet=st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF), max_size=12),
    st.sampled_from(
        [
            "<|endoftext|>",
            "<|fim_prefix|>",
            "<|endofprompt|>",
            "🤖",
            "👩‍👩‍👧‍👦",
            "🇫🇷",
            "é",
            "\n\n",
            "   ",
            "def f(x):\n    return x\n",
            "Ελληνικά",
            "\u200b",
        ]
    ),
)
texts = st.lists(pieces, max_size=6).map("".join)


# --------------------------------------------------------------------------- exactness


def test_cl100k_base_encodes_hello_world_exactly():
    assert load_encoding("cl100k_base").encode("hello world") == [15339, 1917]


def test_o200k_base_encodes_hello_world_exactly():
    assert load_encoding("o200k_base").encode("hello world") == [24912, 2375]


def test_default_encoding_is_o200k_base():
    assert load_encoding().name == "o200k_base"
    assert load_encoding() is load_encoding("o200k_base")  # built once, however it is named
    assert TokenCounter().encoding == "o200k_base"


def test_cl100k_base_matches_known_reference_tokens():
    # Example from OpenAI's tiktoken cookbook.
    assert load_encoding("cl100k_base").encode("tiktoken is great!") == [
        83,
        1609,
        5963,
        374,
        2294,
        0,
    ]


@pytest.mark.parametrize(("name", "token"), [("cl100k_base", 100257), ("o200k_base", 199999)])
def test_special_tokens_come_from_tiktokens_definition(name, token):
    encoding = load_encoding(name)
    assert encoding.encode("<|endoftext|>", allowed_special="all") == [token]
    assert encoding.name == name


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_encodings_round_trip_text(name):
    encoding = load_encoding(name)
    for text in ["hello world", CJK, "emoji 🤖👩‍👩‍👧‍👦 and tabs\t\n", ""]:
        assert encoding.decode(encoding.encode_ordinary(text)) == text


def test_load_encoding_is_cached():
    assert load_encoding("cl100k_base") is load_encoding("cl100k_base")


@settings(max_examples=150, deadline=None)
@given(texts)
def test_count_text_equals_length_of_ordinary_encoding(text):
    assert counter().count_text(text) == len(load_encoding().encode_ordinary(text))
    assert counter("cl100k_base").count_text(text) == len(
        load_encoding("cl100k_base").encode_ordinary(text)
    )


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_special_token_text_counts_as_plain_text(name):
    text = "before <|endoftext|> after"
    count = counter(name).count_text(text)
    assert count == len(load_encoding(name).encode(text, disallowed_special=()))
    assert counter(name).count_text("<|endoftext|>") > 1  # not the single special token


@settings(max_examples=60, deadline=None)
@given(texts, st.sampled_from(["cl100k_base", "o200k_base"]))
def test_a_large_text_is_counted_exactly_as_a_small_one(text, name):
    """Texts from LARGE_TEXT characters on are counted into tiktoken's buffer, not a list:
    the count is the same, special-token text included."""
    large = (text + " <|endoftext|> ") * (tokens.LARGE_TEXT // (len(text) + 15) + 1)
    assert len(large) >= tokens.LARGE_TEXT
    assert counter(name).count_text(large) == len(load_encoding(name).encode_ordinary(large))


def test_count_text_of_empty_string_is_zero():
    assert counter().count_text("") == 0


def test_count_text_grows_with_text():
    assert counter().count_text("word " * 100) > counter().count_text("word " * 10) > 0


# --------------------------------------------------------------------------- offline loading


def test_encodings_load_with_network_disabled_and_empty_tiktoken_cache(tmp_path):
    cache_dir = tmp_path / "tiktoken-cache"
    cache_dir.mkdir()
    script = textwrap.dedent(
        """
        import os
        import socket

        def refuse(*args, **kwargs):
            raise OSError("network access attempted")

        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.create_connection = refuse
        try:
            socket.create_connection(("127.0.0.1", 9))
        except OSError as exc:
            assert "network access attempted" in str(exc)
        else:
            raise SystemExit("socket guard is not active")

        from ctxkit.tokens import TokenCounter, load_encoding

        assert load_encoding("cl100k_base").encode("hello world") == [15339, 1917]
        assert load_encoding("o200k_base").encode("hello world") == [24912, 2375]
        assert TokenCounter("cl100k_base").count_text("hello world") == 2
        assert TokenCounter().count_messages([{"role": "user", "content": "hello"}]) == 8
        assert os.listdir(os.environ["TIKTOKEN_CACHE_DIR"]) == []
        print("offline-ok")
        """
    )
    env = dict(os.environ)
    env["TIKTOKEN_CACHE_DIR"] = str(cache_dir)
    env["DATA_GYM_CACHE_DIR"] = str(cache_dir)
    root = str(Path(ctxkit.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "offline-ok" in done.stdout
    assert list(cache_dir.iterdir()) == []


# --------------------------------------------------------------------------- hash check


@pytest.mark.parametrize(("name", "stem"), [("cl100k_base", "cl100k"), ("o200k_base", "o200k")])
def test_wrong_sha256_of_packaged_data_is_refused(name, stem, monkeypatch, fresh_encoding_cache):
    ranks, digest = tokens._read_quicktok_vocab(stem)
    wrong = "0" * 64
    assert digest != wrong
    monkeypatch.setattr(tokens, "_read_quicktok_vocab", lambda _stem: (ranks, wrong))
    with pytest.raises(EncodingUnavailable, match="sha256") as info:
        load_encoding(name)
    assert wrong in str(info.value)
    assert name in str(info.value)


def test_packaged_data_digest_is_the_one_tiktoken_expects(fresh_encoding_cache):
    # The real digest passes the check: loading succeeds and encodes correctly.
    _, digest = tokens._read_quicktok_vocab("cl100k")
    assert len(digest) == 64
    assert load_encoding("cl100k_base").encode("hello world") == [15339, 1917]


@pytest.mark.parametrize("stem", ["cl100k", "o200k"])
def test_a_known_vocab_file_gives_the_digest_a_full_read_computes(stem, monkeypatch):
    """The shortcut for known files (KNOWN_VOCABS) gives what reading every token gives."""
    ranks, shortcut = tokens._read_quicktok_vocab(stem)
    monkeypatch.setattr(tokens, "KNOWN_VOCABS", {})
    assert tokens._read_quicktok_vocab(stem) == (ranks, shortcut)


def test_missing_packaged_data_raises_instead_of_falling_back(monkeypatch, fresh_encoding_cache):
    def unavailable(stem: str):
        raise EncodingUnavailable(f"no {stem} data")

    monkeypatch.setattr(tokens, "_read_quicktok_vocab", unavailable)
    with pytest.raises(EncodingUnavailable, match="no o200k data"):
        TokenCounter()


def test_unknown_encoding_is_unavailable_listing_the_known_ones():
    with pytest.raises(EncodingUnavailable) as info:
        load_encoding("p50k_base")
    message = str(info.value)
    assert "p50k_base" in message
    assert "cl100k_base" in message
    assert "o200k_base" in message
    with pytest.raises(EncodingUnavailable):
        TokenCounter("gpt2")


# --------------------------------------------------------------------------- message_cost


def count(text: str) -> int:
    return counter().count_text(text)


def cost_parts(message: dict[str, Any]) -> dict[str, int]:
    cost = counter().message_cost(message)
    parts = dict(cost.parts)
    assert len(parts) == len(cost.parts), "a category appears twice"
    assert set(parts) <= set(CATEGORIES)
    assert cost.total == sum(parts.values())
    return parts


def oa_call_message(text: str | None = None) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
            },
            {"id": "c2", "type": "function", "function": {"name": "ls", "arguments": {"d": "."}}},
        ],
    }


def test_user_message_costs_overhead_role_and_text():
    message = {"role": "user", "content": "hello"}
    assert cost_parts(message) == {"user": MESSAGE_OVERHEAD + count("user") + count("hello")}
    assert counter().count_messages([message]) == 8  # the documented example


@pytest.mark.parametrize("role", ["system", "developer"])
def test_system_and_developer_messages_are_system(role):
    message = {"role": role, "content": "You are terse."}
    assert cost_parts(message) == {
        "system": MESSAGE_OVERHEAD + count(role) + count("You are terse.")
    }


def test_assistant_text_is_assistant():
    assert set(cost_parts({"role": "assistant", "content": "Done."})) == {"assistant"}


def test_name_adds_its_tokens_plus_one():
    plain = counter().count_message({"role": "user", "content": "hi"})
    named = counter().count_message({"role": "user", "content": "hi", "name": "alice"})
    assert named == plain + count("alice") + 1


def oa_calls_cost() -> int:
    calls = CALL_OVERHEAD * 2 + count("read_file") + count('{"path": "a.py"}')
    return calls + count("ls") + count('{"d":"."}')  # dict arguments are compact JSON


def test_assistant_with_only_tool_calls_is_tool_calls():
    own = MESSAGE_OVERHEAD + count("assistant")
    assert cost_parts(oa_call_message()) == {"tool_calls": own + oa_calls_cost()}


def test_assistant_with_text_and_tool_calls_has_both_categories():
    text = "Let me look at the file first."
    assert cost_parts(oa_call_message(text)) == {
        "assistant": MESSAGE_OVERHEAD + count("assistant") + count(text),
        "tool_calls": oa_calls_cost(),
    }


def test_tool_message_is_tool_results():
    message = {"role": "tool", "tool_call_id": "c1", "content": "file contents here"}
    assert cost_parts(message) == {
        "tool_results": MESSAGE_OVERHEAD + count("tool") + count("file contents here")
    }


def test_anthropic_user_message_with_only_tool_results_is_tool_results():
    message = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "42 files"},
            {
                "type": "tool_result",
                "tool_use_id": "t2",
                "content": [{"type": "text", "text": "ok"}],
            },
        ],
    }
    own = MESSAGE_OVERHEAD + count("user")
    results = 2 * RESULT_OVERHEAD + count("42 files") + count("ok")
    assert cost_parts(message) == {"tool_results": own + results}


def test_anthropic_user_message_with_results_and_text_has_both_categories():
    message = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "42 files"},
            {"type": "text", "text": "now delete them"},
        ],
    }
    parts = cost_parts(message)
    assert set(parts) == {"user", "tool_results"}
    assert parts["tool_results"] == RESULT_OVERHEAD + count("42 files")


def test_anthropic_tool_use_block_is_tool_calls():
    block = {"type": "tool_use", "id": "t1", "name": "grep", "input": {"pattern": "TODO"}}
    only_call = {"role": "assistant", "content": [block]}
    call_cost = CALL_OVERHEAD + count("grep") + count('{"pattern":"TODO"}')
    assert cost_parts(only_call) == {
        "tool_calls": MESSAGE_OVERHEAD + count("assistant") + call_cost
    }
    with_text = {"role": "assistant", "content": [{"type": "text", "text": "Searching."}, block]}
    assert cost_parts(with_text) == {
        "assistant": MESSAGE_OVERHEAD + count("assistant") + count("Searching."),
        "tool_calls": call_cost,
    }


def test_image_block_costs_a_flat_amount():
    message = {"role": "user", "content": [{"type": "image", "source": {"data": "x" * 10_000}}]}
    assert cost_parts(message) == {"user": MESSAGE_OVERHEAD + count("user") + IMAGE_TOKENS}


@pytest.mark.parametrize(
    "make",
    [
        lambda t: {"role": "user", "content": t},
        lambda t: {"role": "system", "content": t},
        lambda t: {"role": "assistant", "content": t},
        lambda t: {"role": "tool", "tool_call_id": "c", "content": t},
        lambda t: {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t", "content": t}],
        },
        lambda t: {"role": "assistant", "content": [{"type": "text", "text": t}]},
    ],
    ids=["user", "system", "assistant", "tool", "tool_result", "text_block"],
)
def test_longer_content_costs_more(make):
    short = counter().count_message(make("a short line"))
    long = counter().count_message(make("a much longer line of output " * 20))
    assert long > short


def test_count_messages_of_nothing_is_zero():
    assert counter().count_messages([]) == 0
    assert counter().count_messages(iter([])) == 0


# generated valid messages of every kind
message_texts = st.text(max_size=40)


def _tool_call(i: int, name: str, args: str) -> dict[str, Any]:
    return {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": args}}


messages = st.one_of(
    st.builds(
        lambda role, text: {"role": role, "content": text},
        st.sampled_from(["system", "developer", "user", "assistant"]),
        message_texts,
    ),
    st.builds(lambda text: {"role": "tool", "tool_call_id": "c1", "content": text}, message_texts),
    st.builds(
        lambda text, names: {
            "role": "assistant",
            "content": text,
            "tool_calls": [_tool_call(i, n, json.dumps({"q": n})) for i, n in enumerate(names)],
        },
        st.none() | message_texts,
        st.lists(st.text(min_size=1, max_size=10), min_size=1, max_size=3),
    ),
    st.builds(
        lambda text, output: {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": output},
                {"type": "text", "text": text},
            ],
        },
        message_texts,
        message_texts,
    ),
    st.builds(
        lambda text, arg: {
            "role": "assistant",
            "content": [
                {"type": "text", "text": text},
                {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": arg}},
            ],
        },
        message_texts,
        message_texts,
    ),
)


@settings(max_examples=100, deadline=None)
@given(messages)
def test_message_cost_total_is_the_sum_of_its_parts(message):
    cost = counter().message_cost(message)
    assert cost.total == sum(n for _, n in cost.parts)
    assert cost.total == counter().count_message(message)
    assert all(n > 0 for _, n in cost.parts)
    assert {category for category, _ in cost.parts} <= set(CATEGORIES)


@settings(max_examples=60, deadline=None)
@given(st.lists(messages, min_size=1, max_size=6))
def test_count_messages_is_sum_of_messages_plus_reply_priming(ms):
    total = sum(counter().count_message(m) for m in ms)
    assert counter().count_messages(ms) == total + REPLY_PRIMING


@settings(max_examples=60, deadline=None)
@given(st.lists(messages, max_size=8), st.data())
def test_counts_add_up_over_any_split(ms, data):
    cut = data.draw(st.integers(0, len(ms)))
    left, right = ms[:cut], ms[cut:]
    whole = counter().count_messages(ms)
    both = bool(left) and bool(right)
    parts = counter().count_messages(left) + counter().count_messages(right)
    assert whole == parts - (REPLY_PRIMING if both else 0)


# --------------------------------------------------------------------------- clip

ascii_texts = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=300)


@settings(max_examples=100, deadline=None)
@given(ascii_texts, st.integers(0, 40))
def test_clip_is_a_prefix_within_the_token_limit(text, max_tokens):
    clipped = counter().clip(text, max_tokens)
    if count(text) <= max_tokens:
        assert clipped == text
        return
    assert clipped.endswith("…")
    assert text.startswith(clipped[:-1])
    assert count(clipped[:-1]) <= max_tokens
    assert count(clipped) <= max_tokens + 1


@settings(max_examples=100, deadline=None)
@given(texts, st.integers(0, 20))
def test_clip_stays_within_the_token_limit_for_any_text(text, max_tokens):
    clipped = counter().clip(text, max_tokens)
    assert clipped == text or clipped.endswith("…")
    assert count(clipped) <= max(count(text), max_tokens + 1)
    if count(text) <= max_tokens:
        assert clipped == text


def test_clip_leaves_short_text_unchanged():
    assert counter().clip("hello world", 2) == "hello world"
    assert counter().clip("hello world", 100) == "hello world"
    assert counter().clip("", 0) == ""


def test_clip_cuts_long_text_to_a_prefix_with_an_ellipsis():
    clipped = counter().clip("hello world " * 50, 5)
    assert clipped == "hello world hello world…"


def test_clip_never_cuts_inside_a_character():
    text = "🤖🤖🤖🤖"  # each emoji is two o200k tokens
    clipped = counter().clip(text, 2)
    assert "\ufffd" not in clipped
    assert text.startswith(clipped[:-1])


# --------------------------------------------------------------------------- estimator


def test_chars4_estimator_is_a_separate_labelled_class():
    estimator = Chars4Estimator()
    assert not isinstance(TokenCounter(), Chars4Estimator)
    assert type(TokenCounter()) is TokenCounter
    assert estimator.encoding != TokenCounter().encoding
    assert "estimate" in estimator.encoding


def test_chars4_estimator_counts_a_quarter_of_characters():
    estimator = Chars4Estimator()
    assert estimator.count_text("") == 0
    assert estimator.count_text("abcd") == 1
    assert estimator.count_text("abcde") == 2
    assert estimator.count_text(CJK) == (len(CJK) + 3) // 4


def test_estimator_and_exact_counter_differ_on_cjk_text():
    estimator = Chars4Estimator()
    exact = counter()
    assert exact.count_text(CJK) == len(load_encoding().encode_ordinary(CJK))
    assert estimator.count_text(CJK) != exact.count_text(CJK)
    message = [{"role": "user", "content": CJK}]
    assert estimator.count_messages(message) != exact.count_messages(message)


@settings(max_examples=50, deadline=None)
@given(texts)
def test_token_counter_never_returns_estimator_values(text):
    # Whatever the text, the default counter's answer is the exact encoding's.
    assert TokenCounter().count_text(text) == len(load_encoding().encode_ordinary(text))


def test_chars4_estimator_clip_bounds_characters():
    estimator = Chars4Estimator()
    assert estimator.clip("abcdefgh", 2) == "abcdefgh"
    clipped = estimator.clip("x" * 100, 5)
    assert clipped.endswith("…")
    assert len(clipped) <= 4 * 5


@settings(max_examples=200, deadline=None)
@given(history=spoiled_histories())
def test_any_json_in_a_message_is_counted_never_an_error(history):
    """The audit counts recorded messages nobody validated: a list where the role goes, a
    number where the calls or a result's content go, is counted as its JSON, and every
    message costs at least its overhead."""
    for message in history:
        if isinstance(message, dict):
            for counted in (counter(), Chars4Estimator()):
                cost = counted.message_cost(message)
                assert cost.total >= MESSAGE_OVERHEAD
                assert sum(tokens for _, tokens in cost.parts) == cost.total
