"""The event vocabulary and its rules: the envelope (``SessionEvent``), the type constants and
payload models, the header, the surface, turn brackets and the validation of a stored log."""
