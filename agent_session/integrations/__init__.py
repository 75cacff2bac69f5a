"""Adapters for agent frameworks: ``openai_agents`` (the OpenAI Agents SDK's ``Session`` and
run hooks, extra ``[openai-agents]``) and ``pydantic_ai`` (import and export of pydantic-ai
message histories, extra ``[pydantic-ai]``)."""
