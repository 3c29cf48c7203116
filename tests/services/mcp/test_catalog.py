"""The tool set without any server: schemas from the API's models, arguments checked by them."""

from __future__ import annotations

import pytest

from cogsub.api.memories import ProcedureBody, TextBlockBody
from cogsub.core.context import ContextRequest
from cogsub.core.errors import (
    AuthenticationError,
    CogsubError,
    FieldProblem,
    InvalidInputError,
    NotFoundError,
    PermissionDeniedError,
)
from cogsub.core.memory import RecallRequest, RetainRequest
from cogsub.mcp import (
    TOOLS,
    TOOLS_BY_NAME,
    bearer_key,
    error_result,
    input_schema,
    offered,
    parse_call,
)

EXPECTED = {
    "retain",
    "retain_procedure",
    "retain_reasoning",
    "retain_preference",
    "retain_correction",
    "update_profile",
    "recall",
    "context",
    "answer",
    "get_memory",
    "forget_memory",
    "consolidate",
    "list_banks",
}


def test_the_tool_set_is_the_issue_list_and_names_are_unique():
    assert {spec.name for spec in TOOLS} == EXPECTED
    assert len(TOOLS) == len(EXPECTED)


def test_a_pinned_server_hides_the_bank_wide_tools_and_the_bank_argument():
    assert {s.name for s in offered(pinned_bank="alice")} == EXPECTED - {"list_banks"}
    assert {s.name for s in offered(pinned_bank=None)} == EXPECTED
    alone = offered(pinned_bank=None, several_banks=False)
    assert {s.name for s in alone} == EXPECTED - {"list_banks"}
    for spec in offered(pinned_bank="alice"):
        schema = input_schema(spec, pinned_bank="alice")
        assert "bank_id" not in schema.get("properties", {})
        assert "bank_id" not in schema.get("required", [])


def test_every_bank_tool_requires_a_bank_id_with_the_id_limits_when_not_pinned():
    for spec in TOOLS:
        schema = input_schema(spec, pinned_bank=None)
        if spec.bank_wide:
            assert "bank_id" not in schema.get("properties", {})
            continue
        assert schema["required"][0] == "bank_id"
        bank = schema["properties"]["bank_id"]
        assert bank["type"] == "string" and bank["minLength"] == 1 and bank["maxLength"] == 128
        assert schema["additionalProperties"] is False  # unknown arguments are refused


@pytest.mark.parametrize(
    ("tool", "model"),
    [
        ("retain", RetainRequest),
        ("retain_procedure", ProcedureBody),
        ("retain_correction", TextBlockBody),
        ("recall", RecallRequest),
        ("context", ContextRequest),
    ],
)
def test_argument_schemas_carry_the_api_models_rules(tool, model):
    shown = input_schema(TOOLS_BY_NAME[tool], pinned_bank=None)["properties"]
    api = model.model_json_schema()["properties"]
    for name, rules in shown.items():
        if name != "bank_id":
            assert rules == api[name], name  # the very same field, limits included


def test_retain_shows_no_procedure_fields_and_the_text_blocks_show_no_unsent_ones():
    retain = input_schema(TOOLS_BY_NAME["retain"], pinned_bank=None)["properties"]
    assert {"steps", "rationale", "supersedes"}.isdisjoint(retain)
    block = input_schema(TOOLS_BY_NAME["retain_preference"], pinned_bank=None)["properties"]
    assert set(block) == {"bank_id", "text", "tags", "memory_id", "wait"}


def test_valid_arguments_become_the_api_request():
    call = parse_call(
        TOOLS_BY_NAME["retain_procedure"],
        {"bank_id": "alice", "steps": ["make build", "make deploy"], "rationale": "prod"},
        pinned_bank=None,
    )
    assert call.bank_id == "alice"
    assert isinstance(call.request, ProcedureBody)
    assert call.request.steps == ["make build", "make deploy"] and call.request.wait is False
    recall = parse_call(
        TOOLS_BY_NAME["recall"], {"query": "deploy", "types": ["procedure"]}, pinned_bank="bob"
    )
    assert recall.bank_id == "bob" and isinstance(recall.request, RecallRequest)
    assert [t.value for t in recall.request.types or []] == ["procedure"]


def _problems(tool: str, arguments: dict[str, object], pinned: str | None = None):
    with pytest.raises(InvalidInputError) as raised:
        parse_call(TOOLS_BY_NAME[tool], arguments, pinned_bank=pinned)
    return {p.field: p.rule for p in raised.value.problems}


def test_malformed_arguments_name_each_field_and_its_rule():
    assert _problems("retain", {"bank_id": "alice"}) == {"content": "Field required"}
    assert "bank_id" in _problems("retain", {"content": "x"})
    found = _problems("recall", {"bank_id": "a", "query": "q", "k": 0, "types": ["nope"]})
    assert "greater than or equal to 1" in found["k"]
    assert "types.0" in found and "world" in found["types.0"]
    assert (
        "Extra inputs" in _problems("retain", {"bank_id": "a", "content": "x", "oops": 1})["oops"]
    )
    assert (
        "only letters" in _problems("get_memory", {"bank_id": "a", "memory_id": "a/b"})["memory_id"]
    )
    assert "at least 1" in _problems("retain_procedure", {"bank_id": "a", "steps": []})["steps"]
    too_big = _problems("context", {"bank_id": "a", "query": "q", "max_tokens": 100_001})
    assert "100000" in too_big["max_tokens"]


def test_a_bad_bank_id_is_named_with_the_id_rule():
    assert "bank_id" in _problems("consolidate", {"bank_id": ""})
    assert "'..'" in _problems("consolidate", {"bank_id": "a..b"})["bank_id"]


def test_a_pinned_server_takes_its_own_bank_and_refuses_another():
    call = parse_call(TOOLS_BY_NAME["consolidate"], {"bank_id": "alice"}, pinned_bank="alice")
    assert call.bank_id == "alice"
    rule = _problems("consolidate", {"bank_id": "bob"}, pinned="alice")["bank_id"]
    assert "pinned to bank 'alice'" in rule


def test_list_banks_takes_no_bank_and_pages_within_the_api_limit():
    call = parse_call(TOOLS_BY_NAME["list_banks"], {}, pinned_bank=None)
    assert call.bank_id == "" and call.request.limit == 100
    assert "limit" in _problems("list_banks", {"limit": 0})


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (PermissionDeniedError("this API key does not grant that bank"), "forbidden"),
        (AuthenticationError("unknown API key"), "unauthenticated"),
        (NotFoundError("no such memory"), "not_found"),
        (InvalidInputError([FieldProblem("k", "too small")]), "invalid_input"),
        (CogsubError("something else"), "internal"),
    ],
)
def test_errors_become_tool_errors_with_the_api_error_body(error, kind):
    result = error_result(error)
    assert result.is_error is True
    body = result.structured_content["error"]
    assert body["type"] == kind and body["message"] == str(error)
    assert result.content[0].text == f"{kind}: {error}"  # type: ignore[union-attr]
    if isinstance(error, InvalidInputError):
        assert body["problems"] == [{"field": "k", "rule": "too small"}]


def test_bearer_key_reads_only_the_bearer_scheme():
    assert bearer_key("Bearer abc") == "abc"
    assert bearer_key("bearer  abc ") == "abc"
    assert bearer_key("Basic abc") is None
    assert bearer_key("Bearer ") is None
    assert bearer_key(None) is None
