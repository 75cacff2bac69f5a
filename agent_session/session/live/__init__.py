"""The live objects of one process: ``Session``, ``SessionStore``, the hook bus and
``Runtime``."""
