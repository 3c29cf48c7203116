"""``Headers``: the metadata that travels with a bus record, beside its key and value.

It sits in ``core`` because both the bus ports and telemetry (which reads and
writes the W3C trace context in them) need it, and telemetry is below the bus.
"""

from __future__ import annotations

#: Name and raw bytes of each header, in order; a name may repeat.
Headers = tuple[tuple[str, bytes], ...]
