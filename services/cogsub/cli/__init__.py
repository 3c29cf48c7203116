"""The `cogsub` command line: demo, run, publish, status."""

from cogsub.cli.main import main

__all__ = ["main"]
