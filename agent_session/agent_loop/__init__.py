"""The reference agent loop (the reference's ``dsh-agent-loop``): ``AgentRuntime``, the loop,
the model and tool seams, cancellation, and ``ScriptedModel``, a model double for tests and
demos."""

from agent_session.agent_loop.cancel import CancelSignal
from agent_session.agent_loop.loop import (
    AGENT_POST_STEP,
    AGENT_PRE_STEP,
    Agent,
    LlmError,
    StepContext,
)
from agent_session.agent_loop.models import (
    LLM_STREAM,
    ModelAdapter,
    ModelRequest,
    ModelService,
    ModelUnavailableError,
    RequestSettings,
)
from agent_session.agent_loop.runtime import AgentRuntime
from agent_session.agent_loop.scripted import ScriptedCall, ScriptedModel, ScriptedStep
from agent_session.agent_loop.tools import (
    ABORTED_BEFORE_DISPATCH,
    TOOLS_EXECUTE,
    ToolCall,
    ToolResult,
    ToolService,
    ToolSpec,
    aborted_before_dispatch,
)

__all__ = [
    "ABORTED_BEFORE_DISPATCH",
    "AGENT_POST_STEP",
    "AGENT_PRE_STEP",
    "LLM_STREAM",
    "TOOLS_EXECUTE",
    "Agent",
    "AgentRuntime",
    "CancelSignal",
    "LlmError",
    "ModelAdapter",
    "ModelRequest",
    "ModelService",
    "ModelUnavailableError",
    "RequestSettings",
    "ScriptedCall",
    "ScriptedModel",
    "ScriptedStep",
    "StepContext",
    "ToolCall",
    "ToolResult",
    "ToolService",
    "ToolSpec",
    "aborted_before_dispatch",
]
