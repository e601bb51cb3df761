"""What a reviewer may do about an agent's work as a whole: plan, preview and confirm a
rewind of it, and stop or resume the agent (docs/rewind.md).

A plan covers only the caller's own jobs (its owner's) of an agent the key sees; a plan
of another owner is ``NotFound``. Confirming re-checks the credential before each write,
as a job's confirm does.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from ..auth import Keyring
from ..errors import Forbidden, NotFound
from ..operations import agent_stop
from ..operations.context import Context
from ..operations.rewind import (
    RewindPlan,
    RewindPreview,
    confirm_plan,
    create_plan,
    load_plan,
    preview_plan,
)
from ..operations.rewind_plan import Selection
from .access import Caller, Reader, Reviewer, Writer, in_thread


@dataclass(frozen=True)
class Rewinds:
    context: Context
    keyring: Keyring  # the re-check before each dispatch

    def _agent(self, caller: Caller, agent_id: str) -> None:
        """Raises: NotFound (not in the config), Forbidden (a key that does not see it)."""
        if all(a.id != agent_id for a in self.context.config.agents):
            raise NotFound(f"no agent {agent_id!r} in the config", agent=agent_id)
        if not caller.sees_agent(agent_id):
            raise Forbidden(f"this key has no access to agent {agent_id!r}", agent=agent_id)

    def _plan(self, caller: Caller, rewind_id: str) -> RewindPlan:
        """Raises: NotFound (another owner's plan, or one of an agent this key does not
        see: ids reveal nothing)."""
        plan = load_plan(self.context, caller.owner_id, rewind_id)
        if not caller.sees_agent(plan.selection.agent_id):
            raise NotFound(f"no rewind plan {rewind_id!r}", rewind=rewind_id)
        return plan

    async def create(self, caller: Reviewer, selection: Selection) -> RewindPlan:
        """Raises: NotFound, Forbidden, InvalidRequest, and what reading a resource raises."""
        self._agent(caller, selection.agent_id)
        return await in_thread(create_plan, self.context, caller.actor, selection)

    async def plan(self, caller: Reader, rewind_id: str) -> RewindPlan:
        """Raises: NotFound."""
        return await in_thread(self._plan, caller, rewind_id)

    async def preview(self, caller: Reviewer, rewind_id: str) -> RewindPreview:
        """Raises: NotFound, ChangedSincePreview (it ran already)."""

        def run() -> RewindPreview:
            return preview_plan(self.context, caller.actor, self._plan(caller, rewind_id))

        return await in_thread(run)

    def _reauthorize(self, caller: Reviewer, agent_id: str) -> None:
        now = Writer.of(self.keyring.recheck(caller.principal), caller.via)
        if not now.sees_agent(agent_id):
            raise Forbidden("this key no longer has access to the plan's agent")

    async def confirm(
        self,
        caller: Reviewer,
        rewind_id: str,
        token: str,
        *,
        skip_blocked: bool = False,
        passkey_assertion: str | None = None,
    ) -> RewindPlan:
        """Raises: as ``operations.rewind.confirm_plan``."""

        def run() -> RewindPlan:
            plan = self._plan(caller, rewind_id)
            return confirm_plan(
                self.context,
                caller.actor,
                plan,
                token,
                skip_blocked=skip_blocked,
                reauthorize=partial(self._reauthorize, caller, plan.selection.agent_id),
                passkey_assertion=passkey_assertion,
            )

        return await in_thread(run)

    # -- stopping an agent ----------------------------------------------------------------

    async def stopped_at(self, caller: Reader, agent_id: str) -> float | None:
        """When the caller's owner stopped the agent (None: it runs)."""
        self._agent(caller, agent_id)
        return await in_thread(agent_stop.stopped_at, self.context, caller.owner_id, agent_id)

    async def stop(self, caller: Reviewer, agent_id: str) -> float | None:
        """Stop the agent for the caller's owner: its new prepares are refused and its
        waiting jobs held from confirmation until resumed. Raises: NotFound, Forbidden."""
        self._agent(caller, agent_id)
        return await in_thread(agent_stop.set_stopped, self.context, caller.actor, agent_id, True)

    async def resume(self, caller: Reviewer, agent_id: str) -> float | None:
        self._agent(caller, agent_id)
        return await in_thread(agent_stop.set_stopped, self.context, caller.actor, agent_id, False)


__all__ = ["Rewinds"]
