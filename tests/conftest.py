"""Shared pytest configuration."""

# Import hypothesis while the interpreter is fresh. On CPython 3.11.x before the fix for
# gh-106905, pytest's assertion rewriter can hit a spurious "AST constructor recursion depth
# mismatch" SystemError when the hypothesis plugin first imports it late, at session finish.
import hypothesis  # noqa: F401
