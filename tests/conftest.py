"""Shared pytest configuration."""

# Import hypothesis while the interpreter is fresh. On CPython 3.11.x before the fix for
# gh-106905, pytest's assertion rewriter can hit a spurious "AST constructor recursion depth
# mismatch" SystemError when the hypothesis plugin first imports it late, at session finish.
import hypothesis  # noqa: F401

from session import register_event_type

# The plugin event types the suite's own tests append. Appending a type readers would refuse
# is an error (register it first), as it is for a user's plugin.
for _name in (
    "plugin/e",
    "plugin/inner",
    "plugin/next",
    "plugin/note",
    "plugin/outer",
    "plugin/step-note",
    "plugin/test",
    "plugin/thing",
    "plugin/x",
    "plugin/y",
):
    register_event_type(_name)
