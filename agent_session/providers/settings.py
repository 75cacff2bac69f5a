"""What an adapter sends with every request beyond the request itself, in the request
header's words: the provider's own field names become the reference's config fields where it
has one (``temperature``; ``max_tokens``, ``max_completion_tokens`` and ``max_output_tokens``
as ``maxTokens``; ``stop`` and ``stop_sequences`` as ``stop`` when a list of strings;
``reasoning_effort`` as ``reasoningEffort``), and every other field goes under ``extraBody``
as sent. So a log's header says what each request carried, and a request rebuilt from the
log and mapped again is the request that was sent (``tests/test_provider_settings.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from agent_session.agent_loop.models import RequestSettings

__all__ = ["header_settings"]

_NAMES: Final = {
    "temperature": "temperature",
    "max_tokens": "maxTokens",
    "max_completion_tokens": "maxTokens",
    "max_output_tokens": "maxTokens",
    "stop": "stop",
    "stop_sequences": "stop",
    "reasoning_effort": "reasoningEffort",
}


def _fits(name: str, value: Any) -> bool:
    """Whether ``value`` has the type the reference's config field ``name`` has."""
    if name == "temperature":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if name == "maxTokens":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "stop":
        return isinstance(value, list) and all(isinstance(s, str) for s in value)
    return isinstance(value, str) and value != ""  # reasoningEffort


def header_settings(
    mapping: str, sent: Mapping[str, Any], defaults: frozenset[str] = frozenset()
) -> RequestSettings:
    """The settings of an adapter whose request mapping is ``mapping`` (a name and its
    version) and which adds the fields ``sent`` (provider names) to every request;
    ``defaults``: the config fields the adapter chose, not the caller."""
    config: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for field, value in sent.items():
        name = _NAMES.get(field)
        if name is not None and name not in config and _fits(name, value):
            config[name] = value
        else:
            extra[field] = value
    config["adapter"] = mapping
    if extra:
        config["extraBody"] = extra
    return RequestSettings(config, frozenset(defaults) & set(config))
