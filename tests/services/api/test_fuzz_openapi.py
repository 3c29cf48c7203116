"""Fuzz every operation of the served OpenAPI document against the real app over a live stack.

The document (``GET /openapi.json``) drives the requests: hypothesis strategies
are built from each operation's path parameters and request body schema, then
the requests are broken on purpose (hostile ids, wrong types, missing and extra
fields, huge numbers, deep nesting, bytes that are not JSON, wrong content
types and methods, bad keys). Whatever arrives, the app must answer below 500,
every 4xx is the JSON error envelope, and a 422 names the field it refuses.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from cogsub.api import ApiKeys, ApiLimits, create_app
from cogsub.archive.filesystem import FilesystemArchive
from cogsub.consolidation import ConsolidationRound, DerivedWriter
from cogsub.core.events import SafeId
from cogsub.core.topics import CONSOLIDATION_TOPICS
from cogsub.deadletters.desk import DeadLetterDesk
from cogsub.embeddings.hash import HashEmbedder
from cogsub.lifecycle import Lifecycle
from cogsub.recall import MemoryService
from tests.services.api.conftest import KEY_A, KEY_ALL
from tests.services.recall.stack import live_stack

pytestmark = pytest.mark.slow

EXAMPLES_PER_OPERATION = 40
BODY_LIMIT = 65_536
BANK = "fuzz-bank"

# Ids and texts that have broken other systems: traversal, encodings, query DSL, SQL, controls.
HOSTILE = [
    "",
    ".",
    "..",
    "../",
    "../../etc/passwd",
    "%2e%2e",
    "%2e%2e%2f",
    "..%2f",
    "a/b",
    "%00",
    "\x00",
    "a\x00b",
    "*",
    "?",
    "#frag",
    "%",
    "%%",
    '{"match_all":{}}',
    '{"query":{"bool":{"must_not":[]}}}',
    "' OR 1=1 --",
    '"; DROP TABLE documents; --',
    "bank_id:* OR bank_id:*",
    "1; SELECT * FROM documents",
    "\\",
    "\u202e",
    "\ufeff",
    "\ud800",
    "é",
    "日本語",
    "🙂",
    " ",
    "\n",
    "a b",
    "null",
    "true",
    "-1",
    "NaN",
    "x" * 129,
    "y" * 5_000,
]
SAFE_TOKENS = st.from_regex(r"[a-z0-9_][a-z0-9_.:@+-]{0,24}", fullmatch=True).filter(
    lambda s: ".." not in s
)
HOSTILE_OR_TOKEN = st.one_of(st.sampled_from(HOSTILE), SAFE_TOKENS, st.text(max_size=40))
# No key, unknown keys, another scheme, and a key that grants another bank only (403).
BAD_AUTHORIZATIONS = st.sampled_from(
    [
        None,
        "Bearer not-a-key-0123456789",
        "Bearer ",
        "Basic dXNlcjpwYXNz",
        "Bearer ' OR 1=1 --",
        'Bearer {"match_all":{}}',
        f"Bearer {KEY_ALL}x",
        f"Bearer {KEY_A}",
    ]
)
WRONG_CONTENT_TYPES = [
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=xyz",
    "application/xml",
    "application/json; charset=latin-1",
    "application/merge-patch+json",
    "",
]
# Numbers out of every range: the first five parse as inf, nan or 0.0, the rest as ints no
# field allows (the last has more digits than Python turns into an int: a 400).
HUGE_NUMBERS = [
    "1e999",
    "-1e999",
    "NaN",
    "Infinity",
    "1e-999",
    str(10**400),
    "-" + "9" * 4_000,
    "1" * 5_000,
]
OTHER_METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]
_SAFE_ID: TypeAdapter[str] = TypeAdapter(SafeId)

Json = Any


# -- JSON schema (as FastAPI publishes it) to hypothesis strategies ---------------------------


def _resolve(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = components[name]
    return schema


def from_schema(schema: dict[str, Any], components: dict[str, Any]) -> st.SearchStrategy[Json]:
    """Values that fit ``schema`` (kept small: strings up to 40 characters, lists up to 4)."""
    schema = _resolve(schema, components)
    for combinator in ("anyOf", "oneOf"):
        if combinator in schema:
            return st.one_of([from_schema(s, components) for s in schema[combinator]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "string":
        if schema.get("format") == "date-time":
            zones = st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30))])
            return st.datetimes(timezones=zones).map(lambda d: d.isoformat())
        low, high = schema.get("minLength", 0), min(schema.get("maxLength", 40), 40)
        text = st.one_of(SAFE_TOKENS, st.text(min_size=low, max_size=max(low, high)))
        return text.filter(lambda s: low <= len(s) <= schema.get("maxLength", math.inf))
    if kind == "integer":
        low, high = schema.get("minimum"), schema.get("maximum")
        return st.integers(
            min_value=math.ceil(low) if low is not None else None,
            max_value=math.floor(high) if high is not None else None,
        )
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        low = schema.get("minItems", 0)
        high = max(low, min(schema.get("maxItems", 4), 4))
        return st.lists(
            from_schema(schema.get("items", {}), components), min_size=low, max_size=high
        )
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        required = set(schema.get("required", ()))
        return st.fixed_dictionaries(
            {k: from_schema(v, components) for k, v in properties.items() if k in required},
            optional={
                k: from_schema(v, components) for k, v in properties.items() if k not in required
            },
        )
    return st.just({})


def _json_kinds(schema: dict[str, Any], components: dict[str, Any]) -> set[str]:
    """The JSON types ``schema`` accepts (for picking a value it must refuse)."""
    schema = _resolve(schema, components)
    kinds: set[str] = set()
    for combinator in ("anyOf", "oneOf"):
        for sub in schema.get(combinator, ()):
            kinds |= _json_kinds(sub, components)
    if "enum" in schema:
        kinds.add("string")
    if "type" in schema:
        kinds.add(schema["type"])
    if "properties" in schema:
        kinds.add("object")
    return kinds


# -- requests ----------------------------------------------------------------------------------


@dataclass
class Case:
    """One request and what the app must say about it."""

    method: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]
    content: bytes | None
    # Fields this request breaks; a 422 must name at least one of them (or a bad path id).
    broken: set[str] = field(default_factory=set)
    bad_path_ids: set[str] = field(default_factory=set)
    kind: str = "valid"


@dataclass(frozen=True)
class Operation:
    """One operation of the served document."""

    method: str
    path: str
    spec: dict[str, Any]
    served: frozenset[str]  # every method the document lists for this path

    @property
    def body_schema(self) -> dict[str, Any] | None:
        content = self.spec.get("requestBody", {}).get("content", {})
        schema = content.get("application/json", {}).get("schema")
        return schema if isinstance(schema, dict) else None


def _is_safe_id(value: str) -> bool:
    try:
        _SAFE_ID.validate_python(value)
    except ValidationError:
        return False
    return True


def _deep(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


BODY_KINDS = ["valid", "missing", "wrong_type", "extra", "huge", "deep", "bytes"] + [
    "content_type",
    "empty",
    "not_object",
    "method",
]
# What a body of each kind must get when path and key are fine (None: anything below 500).
EXPECTED: dict[str, set[int] | None] = {
    "missing": {422},
    "wrong_type": {422},
    "extra": {422},
    "huge": {400, 422},  # 400: more digits than Python turns into an int
    "deep": {400, 422},  # 400: nested deeper than the JSON parser recurses (10k is 60 KB)
    "bytes": set(range(400, 500)),
    "empty": {422},
    "not_object": {422},
    "method": {405},
    "valid": None,
    "content_type": None,
}


def _resolved_elsewhere(path: str) -> bool:
    """Whether the client rewrites ``path`` (dot segments) before sending it."""
    if "." not in path:
        return False
    try:
        sent = httpx.URL(f"http://testserver{path}").raw_path
    except (UnicodeError, httpx.InvalidURL):
        return False
    return sent != path.encode("utf-8", "surrogatepass")


@st.composite
def cases(draw: st.DrawFn, operation: Operation, components: dict[str, Any]) -> Case:
    """A request to ``operation`` that breaks one thing: the path ids, the key or the body."""
    target = draw(st.sampled_from(["body", "body", "body", "path", "auth"]))
    path = operation.path
    bad_path_ids: set[str] = set()
    for parameter in operation.spec.get("parameters", ()):
        if parameter["in"] != "path":
            continue
        name = parameter["name"]
        value = draw(HOSTILE_OR_TOKEN) if target == "path" else BANK
        if not _is_safe_id(value):
            bad_path_ids.add(name)
        # Percent-encoded (the id arrives whole) or raw (the URL itself is hostile).
        # A lone surrogate goes out as the bytes it would be: invalid UTF-8 in the URL.
        raw = value.encode("utf-8", "surrogatepass")
        encoded = quote(raw, safe="") if draw(st.booleans()) else value
        path = path.replace("{" + name + "}", encoded)
    params: dict[str, str] = {}
    for parameter in operation.spec.get("parameters", ()):
        if parameter["in"] == "query" and draw(st.booleans()):
            fitting = from_schema(parameter.get("schema", {}), components)
            value = draw(st.one_of(fitting, HOSTILE_OR_TOKEN, st.just(BANK)))
            params[parameter["name"]] = value if isinstance(value, str) else json.dumps(value)
    # Parameters nobody declared are ignored, whatever they look like.
    params |= draw(st.dictionaries(HOSTILE_OR_TOKEN, HOSTILE_OR_TOKEN, max_size=3))
    headers = {"Content-Type": "application/json"}
    authorization = draw(BAD_AUTHORIZATIONS) if target == "auth" else f"Bearer {KEY_ALL}"
    if authorization is not None:
        headers["Authorization"] = authorization
    if _resolved_elsewhere(path):
        # Raw dot segments are resolved by the client (RFC 3986) before the request goes
        # out: "/memories/.." is a request for the bank itself, another operation whose
        # refusal names its own fields, not the id that never arrived.
        bad_path_ids = set()
    case = Case(operation.method.upper(), path, params, headers, None, bad_path_ids=bad_path_ids)
    kinds = BODY_KINDS if operation.body_schema is not None else ["valid", "bytes", "method"]
    kind = draw(st.sampled_from(kinds)) if target == "body" else "valid"
    if operation.body_schema is not None:
        kind = _body(draw, case, kind, _resolve(operation.body_schema, components), components)
    elif kind == "bytes":
        case.content = draw(st.binary(max_size=64))  # a body nobody asked for is ignored
        kind = "valid"
    if kind == "method":
        case.method = draw(st.sampled_from([m for m in OTHER_METHODS if m not in operation.served]))
    case.kind = f"{target}:{kind}"
    return case


def _body(
    draw: st.DrawFn, case: Case, kind: str, schema: dict[str, Any], components: dict[str, Any]
) -> str:
    """Set ``case.content`` to a body of ``kind``; returns the kind it could make."""
    body: dict[str, Any] = draw(from_schema(schema, components))
    properties: dict[str, Any] = schema.get("properties", {})
    numeric = sorted(
        n for n, p in properties.items() if _json_kinds(p, components) & {"integer", "number"}
    )
    if kind == "missing" and schema.get("required"):
        name = draw(st.sampled_from(sorted(schema["required"])))
        body.pop(name, None)
        case.broken.add(name)
    elif kind == "wrong_type":
        name = draw(st.sampled_from(sorted(properties)))
        allowed = _json_kinds(properties[name], components)
        # pydantic coerces "5" to 5 and 0 to a datetime; a list or an object it never coerces.
        wrong = [["x"], [[]]] if "object" in allowed else [{"$ne": 1}, {"match_all": {}}]
        body[name] = draw(st.sampled_from(wrong))
        case.broken.add(name)
    elif kind == "extra":
        name = draw(HOSTILE_OR_TOKEN.filter(lambda k: k not in properties))
        body[name] = draw(HOSTILE_OR_TOKEN)
        case.broken.add(name)
    elif kind == "huge" and numeric:
        name = draw(st.sampled_from(numeric))
        literal = draw(st.sampled_from(HUGE_NUMBERS))
        text = json.dumps(body | {name: "__huge__"})
        case.content = text.replace('"__huge__"', literal).encode()
        case.broken.add(name)
        return kind
    elif kind == "deep":
        case.content = _deep(draw(st.sampled_from([100, 999, 1_001, 5_000, 10_000])))
        return kind
    elif kind == "bytes":
        case.content = draw(st.binary(max_size=256).filter(_not_a_json_object))
        return kind
    elif kind == "content_type":
        case.headers["Content-Type"] = draw(st.sampled_from(WRONG_CONTENT_TYPES))
    elif kind == "empty":
        case.content = b""
        return kind
    elif kind == "not_object":
        case.content = json.dumps(draw(st.sampled_from([[], [body], "x", 1, None, True]))).encode()
        return kind
    elif kind not in ("valid", "method"):
        kind = "valid"  # nothing of that kind to break in this body
    case.content = json.dumps(body).encode()
    return kind


def _not_a_json_object(raw: bytes) -> bool:
    try:
        return not isinstance(json.loads(raw), dict)
    except ValueError:
        return True


# -- the app under test ------------------------------------------------------------------------


@pytest.fixture
async def api(data_dir: Path) -> AsyncIterator[httpx.AsyncClient]:
    """The app (keys on, 64 KiB bodies, every optional part wired) over a live embedded stack."""
    async with live_stack(data_dir) as stack:
        # A short wait: the fuzzer may retain one id into two banks, which never turns recallable.
        archive = FilesystemArchive(data_dir / "archive")
        service = MemoryService(
            bus=stack.bus,
            archive=archive,
            index=stack.index,
            embedder=HashEmbedder(),
            wait_timeout_s=0.5,
        )
        await stack.bus.ensure_topics(CONSOLIDATION_TOPICS)
        writer = DerivedWriter(
            bus=stack.bus, archive=archive, index=stack.index, embedder=HashEmbedder()
        )
        rounds = ConsolidationRound(archive=archive, index=stack.index, writer=writer)
        app = create_app(
            service=service,
            auth=ApiKeys({KEY_ALL: ["*"], KEY_A: ["some-other-bank"]}),
            limits=ApiLimits(max_body_bytes=BODY_LIMIT),
            readiness={"index": lambda: stack.index.count("fuzz-readiness")},
            consolidate=rounds.run,
            lifecycle=Lifecycle(archive=archive, index=stack.index),
            dead_letter_desk=DeadLetterDesk(stack.bus),
        )
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            yield client
        await service.drain()
        await archive.close()


async def _operations(api: httpx.AsyncClient) -> tuple[list[Operation], dict[str, Any]]:
    document = (await api.get("/openapi.json")).json()
    operations = [
        Operation(method, path, spec, frozenset(m.upper() for m in item))
        for path, item in document["paths"].items()
        for method, spec in item.items()
    ]
    return operations, document.get("components", {}).get("schemas", {})


# The operations, from the app's own document, to give each one its own test id.
_DOCUMENT = create_app(service=None, auth=None, limits=ApiLimits()).openapi()  # type: ignore[arg-type]
OPERATION_IDS = sorted(
    spec["operationId"] for item in _DOCUMENT["paths"].values() for spec in item.values()
)


def _holds_no_text(content: bytes | None) -> bool:
    """Whether a JSON body holds a key or string that is no Unicode text (a lone surrogate,
    escaped): the API's parser refuses such a body as a whole, naming no field in it."""
    try:
        body = json.loads(content or b"")
    except (ValueError, RecursionError):
        return False

    def strings(value: object) -> Iterator[str]:
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for key, item in value.items():
                yield key
                yield from strings(item)
        elif isinstance(value, list):
            for item in value:
                yield from strings(item)

    try:
        for text in strings(body):
            text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    except RecursionError:
        pass  # too deep to hold a key the check could name
    return False


def test_a_body_holding_a_lone_surrogate_holds_no_text() -> None:
    assert _holds_no_text(b'{"query": "0", "\\ud800": ""}')
    assert _holds_no_text(b'{"query": ["\\udfff"]}')
    assert not _holds_no_text(b'{"query": "\\u00e9 \\ud83d\\ude42"}')  # a pair is text
    assert not _holds_no_text(b"not json") and not _holds_no_text(None)


def _check(case: Case, operation: Operation, response: httpx.Response) -> None:
    status = response.status_code
    where = f"{case.kind} {case.method} {case.path!r} -> {status}: {response.text[:300]}"
    assert status < 500, where
    if 400 <= status < 500:
        assert response.headers.get("content-type", "").startswith("application/json"), where
        error = response.json()["error"]
        assert set(error) == {"type", "message", "problems"}, where
        assert isinstance(error["type"], str) and error["type"], where
        assert isinstance(error["message"], str) and error["message"], where
        assert "Traceback" not in response.text, where
        if status == 422:
            fields = [p["field"] for p in error["problems"]]
            assert fields and all(isinstance(f, str) and f for f in fields), where
            # A key with no name ("") can only be pointed at as the body itself.
            named = {n or "(body)" for n in case.broken | case.bad_path_ids}
            if named and _holds_no_text(case.content):
                named.add("(body)")  # refused whole, as no Unicode text, before any field
            if named:
                assert any(f == n or f.startswith(f"{n}.") for f in fields for n in named), where
    target, kind = case.kind.split(":")
    # A route about one bank names it in its path; a bank_id in the query only narrows a
    # listing of the key's own banks, which a key for another bank may read (its own part).
    params = operation.spec.get("parameters", ())
    guarded = any(p["name"] == "bank_id" and p["in"] == "path" for p in params)
    if target == "auth" and guarded:
        granted_elsewhere = case.headers.get("Authorization") == f"Bearer {KEY_A}"
        assert status == (403 if granted_elsewhere else 401), where
    expected = EXPECTED[kind]
    if target == "body" and expected is not None:
        assert status in expected, where


@pytest.mark.parametrize("operation_id", OPERATION_IDS)
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
async def test_no_request_to_an_operation_gets_a_500_or_an_unclear_refusal(
    api: httpx.AsyncClient, operation_id: str, data: st.DataObject
) -> None:
    operations, components = await _operations(api)
    (operation,) = [o for o in operations if o.spec.get("operationId") == operation_id]
    case = data.draw(cases(operation, components), label="case")
    try:
        request = api.build_request(
            case.method, case.path, params=case.params, headers=case.headers, content=case.content
        )
    except (httpx.InvalidURL, UnicodeEncodeError):
        return  # no client can send it (a lone surrogate, a NUL in the URL): nothing to serve
    _check(case, operation, await api.send(request))
