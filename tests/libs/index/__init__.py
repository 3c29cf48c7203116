"""Tests of the embedded index and of query building."""

from __future__ import annotations

import pytest

# These tests reuse the contract's helpers: register that module for assertion rewriting
# before anything here imports it, whichever directory pytest collects first.
pytest.register_assert_rewrite("tests.contract.index_contract")
