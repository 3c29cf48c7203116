"""The decay benchmark compares like with like: both passes leave the same factors."""

from __future__ import annotations

from benchmarks.decay_pass import measure


async def test_the_pass_in_the_index_leaves_what_the_read_and_patch_pass_left() -> None:
    result = await measure(2_000, 2)
    assert result["same_factors"] is True
    assert result["decayed_last_epoch"] > 1_000  # most of the bank, two epochs in
    assert result["index_ms"] > 0 and result["read_and_patch_ms"] > 0
