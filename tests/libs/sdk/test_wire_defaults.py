"""The SDK reads an answer with the server's own model, defaults included."""

from __future__ import annotations

import httpx

from cogsub.core.lifecycle import ForgetBankReport
from cogsub.sdk import ForgetBankResult
from cogsub.sdk._base import _BaseClient


def test_a_forget_bank_answer_that_does_not_say_complete_is_not_complete() -> None:
    # An answer that does not say the bank is gone must not read as if it were.
    answer = {
        "bank_id": "jane",
        "index_documents": 3,
        "memory_objects": 2,
        "consolidation_objects": 0,
        "audit_key": "audit/jane/20260520T120000.000000Z-0.json",
    }
    call = _BaseClient("http://127.0.0.1:1")._forget_bank_call("jane", "jane")

    result = call.parse(httpx.Response(200, json=answer))

    assert result.complete is False
    assert ForgetBankResult is ForgetBankReport
