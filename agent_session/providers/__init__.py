"""Model adapters for the agent loop on the providers' official SDKs (extras ``[openai]`` and
``[anthropic]``): each streams the reference's chunks for a request built from the session's
surface, retries what is retryable before any output, and says clearly what is missing."""

from agent_session.providers.anthropic import AnthropicModel, messages_request
from agent_session.providers.base import ProviderFailure, ProviderModel
from agent_session.providers.openai_chat import OpenAIChatModel, chat_request
from agent_session.providers.openai_responses import OpenAIResponsesModel, responses_request

__all__ = [
    "AnthropicModel",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "ProviderFailure",
    "ProviderModel",
    "chat_request",
    "messages_request",
    "responses_request",
]
