"""The ``agent-session`` command line: its grammar (``arguments``), its commands, and how
they write and exit. The console script is :func:`main`."""

from agent_session.cli.entry import main

__all__ = ["main"]
