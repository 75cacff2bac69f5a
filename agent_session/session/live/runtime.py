"""``Runtime``: the session services of one process (the hook bus, the live session store and
the installed persistence backend) and plugin installation. The agent loop's services (models,
tools, ``agent()``) are added by ``agent_loop.AgentRuntime``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, Self, runtime_checkable

from agent_session.session.live.hooks import Disposer, HookBus, Middleware
from agent_session.session.live.session import Clock
from agent_session.session.live.store import SessionStore

if TYPE_CHECKING:
    from agent_session.session.persistence.service import SessionPersistence

__all__ = ["Plugin", "PluginScope", "Runtime"]


class PluginScope:
    """What a plugin sees while it installs: the runtime and a hook registry that remembers
    every registration, so the plugin's disposer can remove them all."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.disposer = Disposer()

    def observe(self, name: str, fn: Callable[..., Any]) -> Disposer:
        """Register an observer owned by the plugin."""
        return self._own(self.runtime.hooks.observe(name, fn))

    def listen(self, name: str, fn: Callable[..., Awaitable[Any] | None]) -> Disposer:
        """Register a parallel listener owned by the plugin."""
        return self._own(self.runtime.hooks.listen(name, fn))

    def wrap(self, name: str, middleware: Middleware) -> Disposer:
        """Register a middleware owned by the plugin."""
        return self._own(self.runtime.hooks.wrap(name, middleware))

    def on_dispose(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` when the plugin is disposed."""
        self.disposer.add(callback)

    def _own(self, registration: Disposer) -> Disposer:
        self.disposer.add(registration)
        return registration


@runtime_checkable
class Plugin(Protocol):
    """Anything with ``install(scope)``; a plain function ``plugin(scope)`` works too. Either
    may return a cleanup callable, run on disposal."""

    def install(self, scope: PluginScope) -> Callable[[], None] | None: ...


class Runtime:
    """One hook bus and the services built on it.

    ``runtime.install(plugin)`` returns a :class:`Disposer` that removes everything the plugin
    registered, in reverse order. Hooks compose in registration order.
    """

    def __init__(self, *, clock: Clock | None = None) -> None:
        self.hooks = HookBus()
        """The hook bus every service and plugin registers on."""
        self.sessions = SessionStore(self.hooks, clock=clock)
        """The live sessions."""
        self.persistence: SessionPersistence | None = None
        """The installed persistence backend, if any."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Leaving ``async with Runtime() as runtime:`` flushes every live session, then
        closes the installed persistence backend (whose ``aclose`` flushes and releases its
        locks); the first failure is raised after both were tried."""
        failure: BaseException | None = None
        for session in self.sessions.list():
            try:
                await self.sessions.flush(session)
            except Exception as e:
                failure = failure or e
        if self.persistence is not None:
            try:
                await self.persistence.aclose()
            except Exception as e:
                failure = failure or e
        if failure is not None and exc[0] is None:
            raise failure

    def install(self, plugin: Plugin | Callable[[PluginScope], Any]) -> Disposer:
        """Install a plugin; return its disposer. A plugin that raises while installing is
        rolled back (its registrations removed) and the error propagates."""
        scope = PluginScope(self)
        try:
            cleanup = plugin.install(scope) if isinstance(plugin, Plugin) else plugin(scope)
        except BaseException:
            scope.disposer()
            raise
        if callable(cleanup):
            scope.disposer.add(cleanup)
        return scope.disposer
