"""The semantic checkpoint policy: durable before every model request and tool body, and
after every completed step (a zero-config plugin: ``runtime.install(checkpoint_policy)``)."""

from agent_session.checkpoints.policy import checkpoint_policy

__all__ = ["checkpoint_policy"]
