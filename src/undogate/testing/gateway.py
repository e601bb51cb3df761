"""A real gateway for a kind's contract: ``undogate serve`` as a process on 127.0.0.1
(forked by the launcher, ``launcher.py``, when it can),
with a config of the kind under test, a fresh SQLite ledger, an operator key and an
agent token, spoken to over its HTTP API as any client would.

It can be started with the crash hook (``UNDOGATE_CRASH_AT=operation:point``, see
docs/recovery.md) and killed with SIGKILL, then started again on the same ledger.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import yaml

from ..auth import Keyring
from ..config import parse_config
from ..ledger import open_store
from ..operations.context import CRASH_ENV
from .launcher import Child, popen

AGENT = "kit-agent"
TOOLS = ("list_resources", "prepare_changes", "job_status")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServedGateway:
    """One gateway over ``resources`` (flat config entries, their ``agent_id`` set here)."""

    def __init__(
        self, work: Path, resources: Sequence[Mapping[str, Any]], environ: Mapping[str, str]
    ) -> None:
        work.mkdir(parents=True, exist_ok=True)
        self.config_path = work / "undogate.yaml"
        self.environ = dict(environ)
        config = {
            # A killed gateway's writes in flight are settled once its lease expired:
            # the shortest lease keeps a crash cell quick.
            "server": {"data_dir": str(work / "ledger"), "request_timeout_s": 5, "lease_s": 1.0},
            "resources": [{**r, "agent_id": AGENT} for r in resources],
            "agents": [{"id": AGENT, "tools": list(TOOLS)}],
        }
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        ledger = open_store(parse_config(config).server)
        try:
            keyring = Keyring(ledger, known_agents=lambda: {AGENT})
            operator = keyring.create_operator(label="kit reviewer")
            self.operator_key = operator.key
            self.agent_key = keyring.create_agent_token(
                owner_id=operator.credential.id, agent_id=AGENT, label="kit agent"
            ).key
        finally:
            ledger.close()
        self.url = ""
        self.proc: Child | None = None

    # -- the process -----------------------------------------------------------------------

    def start(self, crash: str | None = None) -> ServedGateway:
        """Serve (``crash``: ``operation:point``, where the process kills itself)."""
        self.stop()
        env = {k: v for k, v in os.environ.items() if not k.startswith("UNDOGATE_")}
        env.update(self.environ)
        if crash:
            env[CRASH_ENV] = crash
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        command = [sys.executable, "-m", "undogate.cli", "serve"]
        command += ["--config", str(self.config_path), "--port", str(port)]
        self.proc = popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read() if self.proc.stderr else b""
                raise AssertionError(f"undogate serve exited: {err.decode(errors='replace')}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1.0).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.05)  # poll interval of a bounded wait
        raise AssertionError("undogate serve did not become healthy")

    def stop(self) -> str:
        """Stop serving (SIGTERM, a bounded wait, SIGKILL); what it wrote on stderr."""
        proc, self.proc = self.proc, None
        if proc is None:
            return ""
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if proc.stderr is None:
            return ""
        with proc.stderr:
            said: bytes = proc.stderr.read()
        return said.decode("utf-8", errors="replace")

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)

    def died_of_sigkill(self, timeout: float = 30.0) -> bool:
        assert self.proc is not None
        code = self.proc.wait(timeout=timeout)
        self.stop()
        return code == -signal.SIGKILL

    # -- the API ---------------------------------------------------------------------------

    def call(
        self, method: str, path: str, body: Any = None, *, agent: bool = False
    ) -> httpx.Response:
        key = self.agent_key if agent else self.operator_key
        return httpx.request(
            method,
            self.url + path,
            json=body,
            headers={"Authorization": f"Bearer {key}"},
            timeout=60,
        )

    def prepare(self, *changes: Mapping[str, Any], **extra: Any) -> httpx.Response:
        body = {"summary": "the kit's change", "changes": [dict(c) for c in changes], **extra}
        return self.call("POST", "/api/v1/jobs", body, agent=True)

    def preview(self, job_id: str, operation: str) -> httpx.Response:
        return self.call("POST", f"/api/v1/jobs/{job_id}/previews", {"operation": operation})

    def confirm(self, job_id: str, token: str, **extra: Any) -> httpx.Response:
        body = {"preview_token": token, "acknowledge_irreversible": True, **extra}
        return self.call("POST", f"/api/v1/jobs/{job_id}/confirm", body)

    def receipt(self, job_id: str) -> dict[str, Any]:
        response = self.call("GET", f"/api/v1/jobs/{job_id}")
        assert response.status_code == 200, response.text
        found: dict[str, Any] = response.json()
        return found

    def settled(self, job_id: str, timeout: float = 30.0) -> dict[str, Any]:
        """The job's receipt once nothing a killed gateway was doing still runs (no write
        in flight, the job not applying or undoing): a live gateway settles that work
        once the dead one's lease expired."""
        deadline = time.monotonic() + timeout
        while True:
            receipt = self.receipt(job_id)
            in_flight = any(a["status"] == "dispatching" for a in receipt["actions"])
            if not in_flight and receipt["state"] not in ("applying", "undoing"):
                return receipt
            assert time.monotonic() < deadline, "a killed gateway's write was never settled"
            time.sleep(0.05)  # poll interval of a bounded wait

    def operate(self, job_id: str, operation: str, **extra: Any) -> httpx.Response:
        """Preview ``operation`` and confirm it; a refused preview is returned as is."""
        preview = self.preview(job_id, operation)
        if preview.status_code != 200:
            return preview
        return self.confirm(job_id, preview.json()["preview_token"], **extra)


__all__ = ["AGENT", "ServedGateway", "free_port"]
