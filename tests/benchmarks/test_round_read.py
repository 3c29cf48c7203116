"""The round-read benchmark compares like with like: both reads pick the same memories."""

from __future__ import annotations

from benchmarks.round_read import measure


async def test_the_slice_read_picks_what_the_whole_bank_walk_picked() -> None:
    result = await measure(3_000, 400, 1)
    assert result["same_memories"] is True
    assert result["documents"] == 3_000 and result["walk_ms"] > 0 and result["slice_ms"] > 0
