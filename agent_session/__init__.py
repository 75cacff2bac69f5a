"""The reference stack assembled and the ``agent-session`` command line."""

__all__: list[str] = []
