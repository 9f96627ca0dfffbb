"""The JSON Schemas of what ctxkit writes (``conformance/*.schema.json``), for tests that read
a report: every report a test sees is checked against the schema a user's tools would use."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema

SPEC = Path(__file__).resolve().parent.parent / "conformance"


@functools.cache
def validator(name: str) -> jsonschema.Draft202012Validator:
    """The validator of ``conformance/NAME.schema.json`` (report, matrix, audit-report)."""
    schema = json.loads((SPEC / f"{name}.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def valid(name: str, data: Any) -> Any:
    """``data``, after checking it against the named schema (raises with the first error)."""
    validator(name).validate(data)
    return data
