"""Every message the suite generates validates against the provider SDK's own request types
(issue 21), strictly: unknown keys and wrong types are refused, not ignored.

- Chat Completions: ``list[openai.types.chat.ChatCompletionMessageParam]``.
- Anthropic: ``list[anthropic.types.MessageParam]``, system messages included: the SDK's
  ``MessageParam`` has a ``SystemMessageParam`` (role ``system``, string or text blocks), which
  is the Chat Completions form the suite writes them in. Only messages are checked, not request
  rules such as alternating roles, which ctxkit's histories do not promise.
- Responses: ``list[openai.types.responses.ResponseInputItemParam]``.
- Gemini: ``google.genai.types.Content`` per content that is not a system message (those travel
  as the system instruction: their text must be a string). Validated from JSON, as the REST body
  travels, so bytes fields (``thoughtSignature``) must be base64. The SDK's models take the REST
  camelCase names (their aliases) and the Python snake_case names alike (``populate_by_name``);
  the suite writes camelCase. Their own config has ``extra='forbid'``, so a misspelt key is
  refused. ``Content.role`` is a free string in the SDK, so it is checked here: user or model.
- Bedrock: botocore's parameter validator against the local ``bedrock-runtime`` service model's
  ``Converse`` input (no network), with system messages as the ``system`` blocks.
- OpenTelemetry GenAI: no SDK ships request types for it, so it is not checked here.

The OpenAI and Anthropic types are TypedDicts, which pydantic validates leniently by default:
extra keys are dropped, and ``Iterable[...]`` fields (tool calls, content blocks) come back as
lazy iterators whose items are validated only when iterated. Hence ``STRICT`` (``extra='forbid'``
and strict types, which reach the nested TypedDicts) and :func:`_forced`, which iterates every
such field; the negative tests below show each validator refusing a broken message.
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxkit.conformance.search.conversations import (
    RoundTemplate,
    Shape,
    conversation_plans,
    in_shape,
    outputs,
    plain_messages,
)

Messages = list[dict[str, Any]]

STRICT = pydantic.ConfigDict(extra="forbid", strict=True)


@functools.cache
def sdk() -> SimpleNamespace:
    """The providers' SDK types, imported and built on first use rather than when the module
    is collected: every xdist worker collects every file, and these imports and adapters
    cost each about two seconds that only the worker running this file needs."""
    import botocore.session
    import botocore.validate
    from anthropic.types import MessageParam
    from botocore.exceptions import ParamValidationError
    from google.genai import types as genai_types
    from openai.types.chat import ChatCompletionMessageParam
    from openai.types.responses import ResponseInputItemParam

    return SimpleNamespace(
        chat_param=ChatCompletionMessageParam,
        chat=pydantic.TypeAdapter(list[ChatCompletionMessageParam], config=STRICT),
        anthropic=pydantic.TypeAdapter(list[MessageParam], config=STRICT),
        responses=pydantic.TypeAdapter(list[ResponseInputItemParam], config=STRICT),
        converse=botocore.session.get_session()
        .get_service_model("bedrock-runtime")
        .operation_model("Converse")
        .input_shape,
        param_validator=botocore.validate.ParamValidator,
        param_error=ParamValidationError,
        genai=genai_types,
    )


def _forced(value: Any) -> Any:
    """``value`` with every lazy iterator pydantic returned iterated, so its items are
    validated too (a ValidationError here is the SDK type refusing an item)."""
    if isinstance(value, dict):
        return {key: _forced(item) for key, item in value.items()}
    if isinstance(value, list | tuple | Iterator):
        return [_forced(item) for item in value]
    return value


def _typed_dicts(name: str) -> Callable[[Messages], None]:
    def validate(messages: Messages) -> None:
        _forced(getattr(sdk(), name).validate_python(messages))

    return validate


def validate_gemini(messages: Messages) -> None:
    for message in messages:
        if message.get("role") == "system":
            assert isinstance(message["content"], str), message
            continue
        assert message.get("role") in ("user", "model"), message
        sdk().genai.Content.model_validate_json(json.dumps(message), strict=True)


def validate_bedrock(messages: Messages) -> None:
    request: dict[str, Any] = {
        "modelId": "x",
        "messages": [m for m in messages if m.get("role") != "system"],
    }
    system = [{"text": m["content"]} for m in messages if m.get("role") == "system"]
    if system:
        request["system"] = system
    report = sdk().param_validator().validate(request, sdk().converse)
    if report.has_errors():
        raise sdk().param_error(report=report.generate_report())


VALIDATORS: dict[Shape, Callable[[Messages], None]] = {
    "openai": _typed_dicts("chat"),
    "anthropic": _typed_dicts("anthropic"),
    "responses": _typed_dicts("responses"),
    "gemini": validate_gemini,
    "bedrock": validate_bedrock,
}
CHECKED: tuple[Shape, ...] = tuple(VALIDATORS)


def refused() -> tuple[type[BaseException], ...]:
    """What the SDKs raise for a message they refuse."""
    return (pydantic.ValidationError, sdk().param_error, AssertionError)


@st.composite
def rounds(draw: st.DrawFn) -> RoundTemplate:
    """A round in any checked shape, 1-3 parallel calls answered in any order, extras or not."""
    results = tuple(draw(st.lists(outputs(), min_size=1, max_size=3)))
    order = tuple(draw(st.permutations(range(len(results)))))
    return RoundTemplate(draw(st.sampled_from(CHECKED)), results, order, draw(st.booleans()))


# ------------------------------------------------------------------------ generated messages


@settings(max_examples=60, deadline=None)
@given(plan=conversation_plans(), shape=st.sampled_from(CHECKED))
def test_every_conversation_validates(plan, shape):
    VALIDATORS[shape](plan.messages((shape,)))


@settings(max_examples=60, deadline=None)
@given(template=rounds(), first_id=st.integers(1, 10**7))
def test_every_round_validates(template, first_id):
    VALIDATORS[template.shape](template.messages(itertools.count(first_id)))


@settings(max_examples=60, deadline=None)
@given(message=plain_messages(), shape=st.sampled_from(CHECKED))
def test_every_plain_message_validates_in_every_shape(message, shape):
    VALIDATORS[shape]([in_shape(message, shape)])


# ----------------------------------------------------------------- the validators have teeth


def _round(shape: Shape) -> Messages:
    """A round the generator writes, extras and all: two calls, one an error, answered out of
    order."""
    return RoundTemplate(shape, ("ok", "Error: no"), (1, 0), extras=True).messages(
        itertools.count(1)
    )


def _openai_extra_key(m: Messages) -> None:
    m[0]["tool_calls"][0]["function"]["strict"] = True


def _openai_no_call_id(m: Messages) -> None:
    del m[1]["tool_call_id"]


def _openai_arguments_object(m: Messages) -> None:
    m[0]["tool_calls"][1]["function"]["arguments"] = {"n": 1}


def _anthropic_tool_use_no_id(m: Messages) -> None:
    del m[0]["content"][-1]["id"]


def _anthropic_result_extra_key(m: Messages) -> None:
    m[1]["content"][0]["output"] = "ok"


def _anthropic_thinking_no_signature(m: Messages) -> None:
    del m[0]["content"][0]["signature"]


def _responses_call_extra_key(m: Messages) -> None:
    next(i for i in m if i["type"] == "function_call")["status_code"] = 200


def _responses_call_no_call_id(m: Messages) -> None:
    del next(i for i in m if i["type"] == "function_call")["call_id"]


def _responses_output_call_id_number(m: Messages) -> None:
    next(i for i in m if i["type"] == "function_call_output")["call_id"] = 3


def _gemini_misspelt_key(m: Messages) -> None:
    m[0]["parts"][1]["functionCal"] = m[0]["parts"][1].pop("functionCall")


def _gemini_response_extra_key(m: Messages) -> None:
    m[1]["parts"][0]["functionResponse"]["result"] = "ok"


def _gemini_signature_not_base64(m: Messages) -> None:
    m[0]["parts"][0]["thoughtSignature"] = "c2lnbmF0dXJl10000"  # 17 characters


def _gemini_assistant_role(m: Messages) -> None:
    m[0]["role"] = "assistant"


def _bedrock_result_no_id(m: Messages) -> None:
    del m[1]["content"][0]["toolResult"]["toolUseId"]


def _bedrock_tool_use_extra_key(m: Messages) -> None:
    m[0]["content"][1]["toolUse"]["arguments"] = '{"n": 0}'


def _bedrock_text_not_string(m: Messages) -> None:
    m[1]["content"][1]["toolResult"]["content"][0]["text"] = 3


BROKEN: list[tuple[Shape, Callable[[Messages], None], str]] = [
    ("openai", _openai_extra_key, r"ToolCallParam\.function\.strict\s+Extra inputs"),
    ("openai", _openai_no_call_id, r"ToolMessageParam\.tool_call_id\s+Field required"),
    ("openai", _openai_arguments_object, r"function\.arguments\s+Input should be a valid str"),
    ("anthropic", _anthropic_tool_use_no_id, r"\bToolUseBlockParam\.id\s+Field required"),
    ("anthropic", _anthropic_result_extra_key, r"\bToolResultBlockParam\.output\s+Extra inputs"),
    ("anthropic", _anthropic_thinking_no_signature, r"\bThinkingBlockParam\.signature\s+Field"),
    ("responses", _responses_call_extra_key, r"ToolCallParam\.status_code\s+Extra inputs"),
    ("responses", _responses_call_no_call_id, r"ToolCallParam\.call_id\s+Field required"),
    ("responses", _responses_output_call_id_number, r"CallOutput\.call_id\s+Input should be"),
    ("gemini", _gemini_misspelt_key, r"functionCal\s+Extra inputs"),
    ("gemini", _gemini_response_extra_key, r"functionResponse\.result\s+Extra inputs"),
    ("gemini", _gemini_signature_not_base64, r"thoughtSignature\s+Data should be valid base64"),
    ("gemini", _gemini_assistant_role, r"'role': 'assistant'"),
    ("bedrock", _bedrock_result_no_id, r'Missing required parameter in .*toolResult: "toolUseId"'),
    ("bedrock", _bedrock_tool_use_extra_key, r'Unknown parameter in .*toolUse: "arguments"'),
    ("bedrock", _bedrock_text_not_string, r"Invalid type for parameter .*\.text, value: 3"),
]


@pytest.mark.parametrize("shape", CHECKED)
def test_the_unbroken_round_validates(shape):
    VALIDATORS[shape](_round(shape))


@pytest.mark.parametrize(
    ("shape", "breaking", "refusal"), BROKEN, ids=[b.__name__.lstrip("_") for _, b, _ in BROKEN]
)
def test_a_broken_round_is_refused(shape, breaking, refusal):
    messages = copy.deepcopy(_round(shape))
    breaking(messages)
    with pytest.raises(refused(), match=refusal):
        VALIDATORS[shape](messages)


def test_without_forcing_pydantic_lets_a_broken_content_block_through():
    """Why :func:`_forced`: the SDK's ``Iterable`` fields are validated lazily, so a tool_use
    block without an id passes ``validate_python`` alone."""
    messages = _round("anthropic")
    _anthropic_tool_use_no_id(messages)
    sdk().anthropic.validate_python(messages)
    with pytest.raises(pydantic.ValidationError):
        _forced(sdk().anthropic.validate_python(messages))


def test_without_strict_config_pydantic_drops_an_unknown_key():
    """Why ``STRICT``: a TypedDict in pydantic's default config ignores keys it does not
    declare."""
    message = {"role": "user", "content": "hi", "nmae": "alice"}
    pydantic.TypeAdapter(list[sdk().chat_param]).validate_python([message])
    with pytest.raises(pydantic.ValidationError, match="nmae"):
        sdk().chat.validate_python([message])


def test_gemini_takes_camel_and_snake_case_names():
    """The REST names (camelCase, the SDK's aliases) are what the suite writes; the Python
    names validate too, so a mix-up between them would not be caught by the SDK."""
    camel = {"role": "model", "parts": [{"functionCall": {"name": "bash", "args": {}}}]}
    snake = {"role": "model", "parts": [{"function_call": {"name": "bash", "args": {}}}]}
    for content in (camel, snake):
        found = sdk().genai.Content.model_validate_json(json.dumps(content), strict=True)
        assert found.parts[0].function_call.name == "bash"
