"""Print the memory API's OpenAPI document, as ``GET /openapi.json`` serves it.

The TypeScript SDK's types are generated from this document and checked
against it (clients/typescript/): a route or wire model that changes here
makes that check fail until the types are regenerated.

    python -m scripts.dump_openapi > clients/typescript/openapi.json
"""

from __future__ import annotations

import json
import sys
from typing import Any


def openapi_document() -> dict[str, Any]:
    """The document of the app ``cogsub run`` serves, built with no stores behind it."""
    from cogsub.api import ApiLimits, create_app
    from cogsub.telemetry.metrics import Metrics

    # The schema comes from the routes and wire models alone: no route runs, so no service.
    # Metrics, as `cogsub run` always has them: they add /metrics and its security scheme.
    app = create_app(service=None, auth=None, limits=ApiLimits(), metrics=Metrics())  # type: ignore[arg-type]
    return app.openapi()


def main() -> int:
    json.dump(openapi_document(), sys.stdout, indent=2, sort_keys=True, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
