"""Tests of how each process wires its stack."""

import pytest

# The contract module's helpers assert: rewrite them whichever package imports them first.
pytest.register_assert_rewrite("tests.contract.index_contract")
