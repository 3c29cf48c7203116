"""The web console: static HTML, CSS and JS modules served by the API at ``/ui``.

No framework, no build step and no request to any other host: every asset ships in
this package (``static/``), and a Content-Security-Policy allowing only the page's own
origin keeps it that way. ``mount`` serves it; ``rounds`` keeps the latest
consolidation rounds the console's operations page lists. Nothing is imported here so
that the worker's wiring can use ``rounds`` without loading the web framework.
"""
