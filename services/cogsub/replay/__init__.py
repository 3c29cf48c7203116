"""Replay: rebuild the associative layer from the truth layer."""

from cogsub.replay.detail import fill_detail
from cogsub.replay.rebuild import ReplayFilter, ReplayReport, replay

__all__ = ["ReplayFilter", "ReplayReport", "fill_detail", "replay"]
