"""Pin the public names of ``cogsub.lifecycle``."""

from __future__ import annotations

import cogsub.lifecycle


def test_public_names_are_pinned_and_sorted() -> None:
    assert cogsub.lifecycle.__all__ == [
        "EXPORT_FORMAT",
        "EXPORT_VERSION",
        "ForgetBankReport",
        "ForgetReport",
        "ImportReport",
        "Lifecycle",
        "LineProblem",
        "actor_label",
    ]
    assert cogsub.lifecycle.__all__ == sorted(cogsub.lifecycle.__all__)
    assert all(hasattr(cogsub.lifecycle, name) for name in cogsub.lifecycle.__all__)
