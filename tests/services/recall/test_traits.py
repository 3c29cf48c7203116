"""A document's traits: read once per document object, never keeping the document alive."""

from __future__ import annotations

import gc
import weakref
from datetime import UTC, datetime

from cogsub.recall.context import epoch_us, instant
from cogsub.recall.traits import traits_of
from tests.services.recall.docs import doc


def test_traits_are_the_documents_time_and_speaker_read_once() -> None:
    document = doc("a", text="Caroline: I went yesterday.", at=1.5)
    traits = traits_of(document)
    assert traits is traits_of(document)
    assert traits.speaker == "caroline"
    assert traits.epoch_s == instant(document.timestamp).timestamp()
    assert traits.epoch_us == epoch_us(instant(document.timestamp))
    assert traits.epoch_us % 1_000_000 == 500_000
    assert traits.says_when(document) is True
    assert traits_of(doc("b", text="no speaker here")).speaker is None


def test_epoch_us_is_exact_where_a_float_is_not() -> None:
    late = datetime(2262, 1, 1, 0, 0, 0, 123_457, tzinfo=UTC)
    assert epoch_us(late) % 1_000_000 == 123_457
    assert int(late.timestamp() * 1_000_000) % 1_000_000 != 123_457


def test_traits_do_not_keep_their_document_alive() -> None:
    document = doc("gone", text="Jon: hi")
    traits_of(document)
    alive = weakref.ref(document)
    del document
    gc.collect()
    assert alive() is None
