"""Forgetting and moving banks: forget, forget_bank (audited), export and import.

``Lifecycle`` is the one entry point; :mod:`~cogsub.lifecycle.provenance`,
:mod:`~cogsub.lifecycle.records` and :mod:`~cogsub.lifecycle.bundle` are the pure
parts (what to erase, what the audit says, the export format).
"""

from cogsub.lifecycle.bundle import EXPORT_FORMAT, EXPORT_VERSION, ImportReport, LineProblem
from cogsub.lifecycle.records import ForgetBankReport, ForgetReport, actor_label
from cogsub.lifecycle.service import Lifecycle

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "ForgetBankReport",
    "ForgetReport",
    "ImportReport",
    "Lifecycle",
    "LineProblem",
    "actor_label",
]
