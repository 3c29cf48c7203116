"""Replay: rebuild the associative layer from the truth layer."""

from cogsub.replay.rebuild import ReplayFilter, ReplayReport, replay

__all__ = ["ReplayFilter", "ReplayReport", "replay"]
