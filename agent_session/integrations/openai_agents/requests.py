"""The request header of an SDK model call, from what ``RunHooks.on_llm_start`` is given:
the instructions the SDK resolved (the system prompt), the agent's model and its
``ModelSettings``, its function tools and handoffs (each sent as a function the model may
call). Settings take the reference's names where it has one (``temperature``, ``max_tokens``
as ``maxTokens``) and the rest go under ``extraBody`` (the settings' ``extra_body`` and
``extra_args`` merged in, as the SDK sends them); ``adapter`` names the SDK and its version.

Left out: what a run hook cannot see (a ``RunConfig``'s model settings, the tools of MCP
servers, which the SDK lists per run), and what is not a request field or may hold a
secret (``extra_headers``, ``extra_query``, the client's ``retry`` and ``timeout``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from agents import Agent
from agents.handoffs import Handoff, handoff
from agents.tool import FunctionTool
from agents.version import __version__ as sdk_version

from agent_session.integrations.openai_agents.items import PROVIDER
from agent_session.providers.settings import header_settings

__all__ = ["request_header"]

NOT_SENT: Final = frozenset(
    {"extra_headers", "extra_query", "retry", "timeout", "preserve_raw_usage"}
)
"""``ModelSettings`` fields never recorded: the client's own, or headers that may carry keys."""


def _tools(agent: Agent[Any]) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    for tool in agent.tools:
        if isinstance(tool, FunctionTool):
            parameters: Any = tool.params_json_schema
            tools.append(
                {"name": tool.name, "description": tool.description, "parameters": parameters}
            )
        else:  # (a hosted tool: the provider knows its schema)
            name = getattr(tool, "name", type(tool).__name__)
            tools.append({"name": str(name), "description": "", "parameters": {}})
    for entry in agent.handoffs:
        made: Handoff[Any, Any] = entry if isinstance(entry, Handoff) else handoff(entry)
        tools.append(
            {
                "name": made.tool_name,
                "description": made.tool_description,
                "parameters": made.input_json_schema,
            }
        )
    return tools


def request_header(agent: Agent[Any], model: str, system: str | None) -> dict[str, Any]:
    """The ``request/header`` of a model call ``agent`` makes to ``model`` with the system
    prompt ``system``."""
    fields = {
        k: v
        for k, v in agent.model_settings.to_json_dict().items()
        if v is not None and k not in NOT_SENT
    }
    sent: dict[str, Any] = {}
    for name, value in fields.items():
        if name in ("extra_body", "extra_args") and isinstance(value, Mapping):
            sent.update(value)
        else:
            sent[name] = value
    settings = header_settings(f"openai-agents/{sdk_version}", sent)
    header: dict[str, Any] = {"config": {"provider": PROVIDER, "model": model, **settings.config}}
    if system:
        header["system"] = system
    tools = _tools(agent)
    if tools:
        header["tools"] = tools
    return header
