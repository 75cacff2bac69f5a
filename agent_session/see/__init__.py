"""Seeing what happened: a session's figures (``stats``), its transcript, full-text search,
the HTML timeline (``view``), the local web app (``serve``) and the store's inventory."""
