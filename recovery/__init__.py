"""Placeholder: implemented by its own issue."""
