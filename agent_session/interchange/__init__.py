"""Interchange with other formats: the derived history in provider request shapes
(``export``), and whole sessions published into a store at once (``publish``)."""
