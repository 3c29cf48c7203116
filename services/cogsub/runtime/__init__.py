"""Process wiring: settings in, adapters out."""

from cogsub.runtime.adapters import build_embedder
from cogsub.runtime.settings import Settings
from cogsub.runtime.wiring import Stack, open_stack

__all__ = ["Settings", "Stack", "build_embedder", "open_stack"]
