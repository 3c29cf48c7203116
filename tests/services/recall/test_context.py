"""Neighbour links: same session, ordered by time, within the gap."""

from __future__ import annotations

from cogsub.recall.context import neighbour_links
from tests.services.recall.docs import doc


def test_candidates_of_a_session_link_in_time_order_whatever_their_order_in() -> None:
    docs = [
        doc("c", session="s", at=30),
        doc("a", session="s", at=10),
        doc("b", session="s", at=20),
    ]
    links = neighbour_links(docs, max_gap_s=60)
    assert links.before == (2, None, 1)
    assert links.after == (None, 2, 0)


def test_no_links_across_sessions_without_a_session_or_beyond_the_gap() -> None:
    docs = [
        doc("a", session="s", at=0),
        doc("b", session="t", at=1),
        doc("c", session=None, at=2),
        doc("d", session=None, at=3),
        doc("e", session="s", at=1_000),
    ]
    links = neighbour_links(docs, max_gap_s=60)
    assert links.before == (None,) * 5 and links.after == (None,) * 5


def test_equal_times_are_ordered_by_event_id() -> None:
    docs = [doc("b", session="s", at=5), doc("a", session="s", at=5)]
    links = neighbour_links(docs, max_gap_s=0)
    assert links.after == (None, 0) and links.before == (1, None)
