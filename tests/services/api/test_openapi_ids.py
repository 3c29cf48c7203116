"""The id rule the OpenAPI document publishes for path ids is the one the routes enforce."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from cogsub.api import ApiLimits, create_app
from cogsub.core.events import SafeId

_SAFE_ID: TypeAdapter[str] = TypeAdapter(SafeId)
_DOCUMENT = create_app(service=None, auth=None, limits=ApiLimits()).openapi()  # type: ignore[arg-type]
PATH_IDS = [
    parameter["schema"]
    for item in _DOCUMENT["paths"].values()
    for spec in item.values()
    for parameter in spec.get("parameters", ())
    if parameter["in"] == "path"
]


def published_accepts(schema: dict[str, object], value: str) -> bool:
    pattern = schema["pattern"]
    assert isinstance(pattern, str)
    # The rule the description adds in words: the pattern cannot say "no '..'".
    return (
        int(str(schema["minLength"])) <= len(value) <= int(str(schema["maxLength"]))
        # ECMA's "$" (JSON Schema) never matches before a final newline; Python's does.
        and re.fullmatch(pattern.removeprefix("^").removesuffix("$"), value) is not None
        and ".." not in value
    )


def server_accepts(value: str) -> bool:
    try:
        _SAFE_ID.validate_python(value)
    except ValidationError:
        return False
    return True


def test_every_path_id_publishes_the_rule() -> None:
    assert len(PATH_IDS) >= 15  # every bank route, plus the memory ids
    for schema in PATH_IDS:
        assert {"pattern", "minLength", "maxLength", "description"} <= set(schema)
        assert "'..'" in str(schema["description"])


@given(
    st.one_of(
        st.text(max_size=140),
        st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.:@+-]{0,140}", fullmatch=True),
        st.sampled_from(["a..b", "..", "x" * 128, "x" * 129, "a\n", "_", "-a", "é"]),
    )
)
def test_the_published_rule_and_the_servers_agree(value: str) -> None:
    for schema in PATH_IDS:
        assert published_accepts(schema, value) == server_accepts(value), value
