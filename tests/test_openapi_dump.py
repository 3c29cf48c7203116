"""The OpenAPI document the TypeScript SDK is generated from is the API's own.

clients/typescript/openapi.json is committed beside the types generated from it;
when a route or wire model changes, this fails until both are regenerated
(``npm run openapi && npm run generate`` in clients/typescript). The npm tests
check the same document against a running server and the types against it.
"""

from __future__ import annotations

import json
from pathlib import Path

from scripts.dump_openapi import openapi_document

COMMITTED = Path(__file__).resolve().parents[1] / "clients" / "typescript" / "openapi.json"


def test_the_committed_document_is_the_apis() -> None:
    committed = json.loads(COMMITTED.read_text(encoding="utf-8"))
    assert committed == openapi_document(), (
        "clients/typescript/openapi.json drifted from the API: run "
        "`npm run openapi && npm run generate` in clients/typescript and commit both"
    )


def test_the_document_names_every_sdk_operation() -> None:
    operations = {
        operation["operationId"]
        for item in openapi_document()["paths"].values()
        for operation in item.values()
    }
    seed = {"retain", "retainProcedure", "retainReasoning", "retainPreference"}
    assert seed | {"retainCorrection", "updateProfile", "recall", "getMemory"} <= operations
