"""The demo's real model (``agent-session demo --model PROVIDER/NAME``): which adapter serves
each provider name, built from the environment, with errors that say what is missing."""

from __future__ import annotations

from typing import Any, Final

from agent_session.cli.exits import UserError

__all__ = ["PROVIDERS", "real_adapter", "task"]

PROVIDERS: Final = {
    "openai": "OpenAIResponsesModel",
    "openai-chat": "OpenAIChatModel",
    "anthropic": "AnthropicModel",
}
"""Provider names ``--model`` accepts, and the adapter of each (``agent_session.providers``)."""


def real_adapter(model: str) -> tuple[str, Any]:
    """``(provider, adapter)`` for ``model`` (``provider/name``), its client made from the
    environment (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``; ``*_BASE_URL`` too).

    Raises:
        UserError: A malformed name, an unknown provider, a missing extra or key.
    """
    provider, slash, name = model.partition("/")
    known = ", ".join(PROVIDERS)
    if not slash or not provider or not name:
        raise UserError(f'--model must be "provider/name" (providers: {known}), not {model!r}')
    if provider not in PROVIDERS:
        raise UserError(f'--model names the unknown provider "{provider}" (known: {known})')
    try:
        from agent_session import providers

        adapter = getattr(providers, PROVIDERS[provider])()
    except (ImportError, ValueError) as e:
        raise UserError(str(e)) from None
    return provider, adapter


def task(turn: int) -> str:
    """What the user asks a real model in each demo turn: a read, then a write (the tool
    failpoints live in ``write_file``)."""
    return (
        f"Task {turn}: call read_file with path notes-{turn}-1.txt, then call write_file with "
        f"path notes-{turn}-2.txt and content hello, then answer in one short sentence."
    )
