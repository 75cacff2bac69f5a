"""The request header of an ADK model call, from the ``LlmRequest`` a plugin sees before the
model is called (:class:`RequestRecorder`): the system instruction, the function
declarations and other tools of the request's config, the model, and the config's other
fields, by the reference's names where it has one (``temperature``, ``max_output_tokens``
as ``maxTokens``, ``stop_sequences`` as ``stop``) and under ``extraBody`` otherwise;
``adapter`` names ADK and its version. ``http_options`` (which may carry a key in its
headers) is never recorded.

The service keeps the header of a session's last request and logs it with the model
response that answers it, in that response's step, when it differs from the last one the
log holds: so ``logged_requests`` reads back what each request was sent."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from google.adk.agents.callback_context import CallbackContext
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.version import __version__ as adk_version

from agent_session.integrations.google_adk.mapping import PROVIDER
from agent_session.providers.settings import header_settings

__all__ = ["NOT_SENT", "RequestRecorder", "request_header"]

NOT_SENT: Final = frozenset({"http_options", "should_return_http_response"})
"""Config fields never recorded: the client's own, whose headers may carry a key."""


def _system(value: Any) -> str | None:
    if isinstance(value, str):
        return value or None
    parts = value.get("parts") if isinstance(value, Mapping) else None
    texts = [p.get("text") for p in parts or () if isinstance(p, Mapping)]
    joined = "\n".join(t for t in texts if isinstance(t, str))
    return joined or None


def _tools(tools: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, Mapping):
            continue
        for kind, value in tool.items():
            if kind != "function_declarations":  # (a built-in tool: the provider's schema)
                out.append({"name": kind, "description": "", "parameters": {}})
                continue
            for declared in value if isinstance(value, list) else ():
                schema = declared.get("parameters_json_schema", declared.get("parameters", {}))
                out.append(
                    {
                        "name": str(declared.get("name", "")),
                        "description": str(declared.get("description", "")),
                        "parameters": schema,
                    }
                )
    return out


def request_header(request: LlmRequest) -> dict[str, Any]:
    """The ``request/header`` of ``request`` (see the module docstring)."""
    config = request.config
    dump = {} if config is None else config.model_dump(exclude_none=True, mode="json")
    system = _system(dump.pop("system_instruction", None))
    tools = _tools(dump.pop("tools", None))
    sent = {k: v for k, v in dump.items() if k not in NOT_SENT}
    settings = header_settings(f"google-adk/{adk_version}", sent)
    model = request.model or "unknown"
    header: dict[str, Any] = {"config": {"provider": PROVIDER, "model": model, **settings.config}}
    if system:
        header["system"] = system
    if tools:
        header["tools"] = tools
    return header


class RequestRecorder(BasePlugin):
    """An ADK plugin that hands each model request's header to ``asked(app, user, session,
    header)`` (the service's, from :meth:`EventLogSessionService.request_recorder`); it
    changes nothing about the request."""

    def __init__(self, asked: Callable[[str, str, str, dict[str, Any]], None]) -> None:
        super().__init__(name="agent_session_requests")
        self._asked = asked

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        session = callback_context.session
        self._asked(session.app_name, session.user_id, session.id, request_header(llm_request))
        return None
