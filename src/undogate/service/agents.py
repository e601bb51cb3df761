"""What an agent may do: learn its tools, list its resources, prepare a job and, opted
in, read its own job's state. The agent opt-in (``agents[].tools`` in the config) is
checked here and only here."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import Resource
from ..errors import Forbidden
from ..jobs import Prepared, PrepareRequest
from ..operations.context import Context
from ..operations.job_status import JobStatus, job_status
from ..operations.prepare import prepare_job
from .access import AgentCaller, in_thread


@dataclass(frozen=True)
class Agents:
    context: Context

    def opted_in(self, agent_id: str) -> tuple[str, ...]:
        """The tools the config opts ``agent_id`` in to, in config order."""
        return self.context.config.agent_tools(agent_id)

    def _require_tool(self, agent_id: str, tool: str) -> None:
        if tool not in self.opted_in(agent_id):
            raise Forbidden(f"agent {agent_id!r} is not opted in to {tool}")

    def tools(self, caller: AgentCaller) -> tuple[str, ...]:
        """The tools the agent's config opts it in to, in config order."""
        return self.opted_in(caller.agent_id)

    def list_resources(self, caller: AgentCaller) -> list[Resource]:
        """Raises: Forbidden: not opted in to list_resources."""
        self._require_tool(caller.agent_id, "list_resources")
        return self.context.config.resources_for(caller.agent_id)

    async def prepare(self, caller: AgentCaller, request: PrepareRequest) -> Prepared:
        """Raises: Forbidden (not opted in to prepare_changes), and what
        ``operations.prepare.prepare_job`` raises."""
        self._require_tool(caller.agent_id, "prepare_changes")
        return await in_thread(prepare_job, self.context, caller.actor, caller.agent_id, request)

    async def job_status(self, caller: AgentCaller, job_id: str) -> JobStatus:
        """An agent's own job: its state and a reviewer's reason, never values.

        Raises: Forbidden (not opted in to job_status); NotFound (no such job, or another
        agent's or owner's: the same answer).
        """
        self._require_tool(caller.agent_id, "job_status")
        return await in_thread(job_status, self.context, caller.owner_id, caller.agent_id, job_id)


__all__ = ["Agents"]
