"""The memory HTTP API: retain, recall and get over one MemoryService."""

from cogsub.api.app import create_app
from cogsub.api.auth import ApiKeys
from cogsub.api.errors import ErrorBody
from cogsub.api.limits import ApiLimits
from cogsub.api.server import ApiServer

__all__ = ["ApiKeys", "ApiLimits", "ApiServer", "ErrorBody", "create_app"]
