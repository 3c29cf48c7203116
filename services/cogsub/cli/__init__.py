"""The `cogsub` command line: demo, run, ingest, serve, publish, status, retain, recall."""

from cogsub.cli.main import main

__all__ = ["main"]
