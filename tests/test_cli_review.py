"""The reviewer CLI against a served gateway: confirming verbs through a pseudo-terminal,
refused without one."""

from __future__ import annotations

import io
import os
import re
import select
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console

from undogate.cli.review import _render_requests
from undogate.contract_server import ContractServer
from undogate.testing.launcher import popen, run
from undogate.views import request_view

from .serving import SERVED_PATH, cli

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


class Terminal:
    """A CLI process on a pseudo-terminal; reads with bounded waits."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        master, slave = os.openpty()
        self.fd = master
        self.proc = popen(
            [sys.executable, "-m", "undogate.cli", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**env, "COLUMNS": "160", "TERM": "xterm"},
            start_new_session=True,
        )
        os.close(slave)
        self.output = ""

    def read_until(self, needle: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while needle not in ANSI.sub("", self.output):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out waiting for {needle!r}; got:\n{self.text}")
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                continue
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                chunk = b""
            if not chunk:
                raise AssertionError(f"ended before {needle!r}; got:\n{self.text}")
            self.output += chunk.decode("utf-8", "replace")
        return self.text

    def send(self, line: str) -> None:
        os.write(self.fd, line.encode() + b"\r")

    def finish(self, timeout: float = 30.0) -> int:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.proc.kill()
                raise AssertionError(f"did not finish; got:\n{self.text}")
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.5))
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    break
                self.output += chunk.decode("utf-8", "replace")
            elif self.proc.poll() is not None:
                break
        os.close(self.fd)
        return self.proc.wait(timeout=max(1.0, deadline - time.monotonic()))

    @property
    def text(self) -> str:
        return ANSI.sub("", self.output).replace("\r", "")


def prepare(served: dict[str, Any], body: str) -> str:
    response = httpx.post(
        f"{served['url']}/api/v1/jobs",
        content=body,
        headers={"Authorization": f"Bearer {served['agent']}", "Content-Type": "application/json"},
        timeout=30,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["job_id"])


JOB = (
    '{"summary": "Promote [bold red]lead[/bold red]", "attribution_label": "crm-sync",'
    ' "changes": [{"resource": "customer", "set": {"status": "vip\\u001b[2J"},'
    ' "assertion_kind": "inferred"}]}'
)


def reviewer_env(served: dict[str, Any]) -> dict[str, str]:
    return {**served["env"], "UNDOGATE_KEY": str(served["operator"])}


def test_apply_then_undo_through_a_terminal(served: dict[str, Any], server: ContractServer) -> None:
    start = server.get_record(SERVED_PATH)
    job = prepare(served, JOB)
    env = reviewer_env(served)
    term = Terminal(["apply", job], env)
    shown = term.read_until('Type "apply"')
    assert "status" in shown and '"lead"' in shown
    assert '"vip\\u001b[2J"' in shown  # the escape is shown, never obeyed
    assert "PATCH http://127.0.0.1" in shown and "If-Match" in shown
    assert "source of the values (the agent's claim): inferred  (caller-supplied" in shown
    assert server.write_count(SERVED_PATH) == 0
    term.send("apply")
    term.read_until("is now applied")
    assert term.finish() == 0
    assert "step: change 1 PATCH -> done" in term.text
    assert server.get_record(SERVED_PATH)["status"] == "vip\x1b[2J"

    term = Terminal(["undo", job], env)
    shown = term.read_until('Type "undo"')
    term.send("undo")
    term.read_until("is now undone")
    assert term.finish() == 0
    assert server.get_record(SERVED_PATH) == start


def test_a_wrong_answer_cancels_and_writes_nothing(
    served: dict[str, Any], server: ContractServer
) -> None:
    job = prepare(served, JOB)
    term = Terminal(["apply", job], reviewer_env(served))
    term.read_until('Type "apply"')
    term.send("yes")
    assert term.finish() == 1
    assert "cancelled: nothing was written" in term.text
    assert server.write_count(SERVED_PATH) == 0


def test_confirming_verbs_refuse_without_a_terminal(
    served: dict[str, Any], server: ContractServer
) -> None:
    job = prepare(served, JOB)
    env = reviewer_env(served)
    for verb in ("apply", "undo", "reconcile", "reject"):
        done = run([sys.executable, "-m", "undogate.cli", verb, job], env=env)
        assert done.returncode == 2, (verb, done.stdout, done.stderr)
        assert "interactive terminal" in done.stdout + done.stderr
    assert server.write_count(SERVED_PATH) == 0
    events = httpx.get(
        f"{served['url']}/api/v1/jobs/{job}/events",
        headers={"Authorization": f"Bearer {served['operator']}"},
    ).json()["events"]
    assert [e["operation"] for e in events] == ["prepare"]  # not even a preview was made


def test_dry_run_shows_the_exact_requests_and_sends_nothing(
    served: dict[str, Any], server: ContractServer
) -> None:
    job = prepare(served, JOB)
    done = cli("apply", job, "--dry-run", env=reviewer_env(served))
    assert done.returncode == 0, done.stderr
    assert "PATCH http://127.0.0.1" in done.stdout
    assert '"op":"test"' in done.stdout and '"op":"replace"' in done.stdout
    assert "dry run: nothing was sent" in done.stdout
    assert server.write_count(SERVED_PATH) == 0


def test_reject_through_a_terminal_and_show_marks_caller_supplied_text(
    served: dict[str, Any], server: ContractServer
) -> None:
    job = prepare(served, JOB)
    env = reviewer_env(served)
    term = Terminal(["reject", job], env)
    shown = term.read_until('Type "reject"')
    assert "[bold red]lead[/bold red]" in shown  # markup in agent text stays literal
    assert "attribution label: crm-sync  (caller-supplied, not verified)" in shown
    term.send("reject")
    term.read_until("is now rejected")
    assert term.finish() == 0
    listed = cli("jobs", "list", "--agent", "account-assistant", env=env)
    assert listed.returncode == 0, listed.stderr
    assert job in listed.stdout and "rejected" in listed.stdout
    shown_job = cli("jobs", "show", job, env=env)
    assert shown_job.returncode == 0
    assert "summary (agent-supplied text)" in shown_job.stdout
    assert "\x1b[2J" not in shown_job.stdout
    assert server.write_count(SERVED_PATH) == 0


def test_the_cli_marks_invisible_and_blank_looking_characters(served: dict[str, Any]) -> None:
    blanks = "\\u3164\\u115f\\u1160\\uffa0\\u2800\\u034f\\ufe0f"
    job = prepare(
        served,
        f'{{"summary": "hand to lee{blanks}", "attribution_label": "crm{blanks}",'
        f' "changes": [{{"resource": "customer", "set": {{"owner": "lee{blanks}"}}}}]}}',
    )
    shown = cli("jobs", "show", job, env={**reviewer_env(served), "COLUMNS": "300"})
    assert shown.returncode == 0, shown.stderr
    marked = "⟨U+3164⟩⟨U+115F⟩⟨U+1160⟩⟨U+FFA0⟩⟨U+2800⟩⟨U+034F⟩⟨U+FE0F⟩"
    for ch in "\u3164\u115f\u1160\uffa0\u2800\u034f\ufe0f":
        assert ch not in shown.stdout, f"U+{ord(ch):04X}"
    assert f"hand to lee{marked}" in shown.stdout  # the agent's summary
    assert f"crm{marked}" in shown.stdout  # the caller-supplied label
    assert f'"lee{marked}"' in shown.stdout  # the value, as JSON text


def test_a_real_invisible_character_cannot_be_faked_by_text_in_the_terminal(
    served: dict[str, Any],
) -> None:
    # Side by side: an agent's literal text "⟨U+200B⟩" and the character itself.
    job = prepare(
        served,
        '{"summary": "two leads", "changes": [{"resource": "customer", "set": '
        '{"status": "lead\u27e8U+200B\u27e9", "owner": "lead\u200b"}}]}',
    )
    env = {**reviewer_env(served), "COLUMNS": "200", "FORCE_COLOR": "1", "TERM": "xterm"}
    shown = cli("jobs", "show", job, env=env)
    assert shown.returncode == 0, shown.stderr
    assert "\u200b" not in shown.stdout
    reverse = "\x1b[7m⟨U+200B⟩\x1b[0m"
    assert shown.stdout.count(reverse) == 1  # the real one: in reverse video
    assert '"lead⟨U+200B⟩"' in shown.stdout  # the typed one: plain text
    plain = shown.stdout.replace(reverse, "")
    assert "⟨U+200B⟩" in plain and "\x1b[7m" not in plain


def test_the_cli_refuses_to_send_a_key_over_plain_http_beyond_this_machine() -> None:
    result = cli(
        "jobs",
        "list",
        "--agent",
        "account-assistant",
        env={**os.environ, "UNDOGATE_URL": "http://10.0.0.5:8080", "UNDOGATE_KEY": "ugo_x"},
    )
    assert result.returncode == 2
    assert "use https" in result.stderr


def test_a_blocked_undo_shows_what_blocks_it_and_writes_nothing(
    served: dict[str, Any], server: ContractServer
) -> None:
    job = prepare(served, JOB)
    reviewer = {"Authorization": f"Bearer {served['operator']}"}
    base = f"{served['url']}/api/v1/jobs/{job}"
    token = httpx.post(f"{base}/previews", json={"operation": "apply"}, headers=reviewer).json()
    httpx.post(f"{base}/confirm", json={"preview_token": token["preview_token"]}, headers=reviewer)
    server.set_field(SERVED_PATH, "/status", "edited later")
    writes = server.write_count(SERVED_PATH)
    term = Terminal(["undo", job], reviewer_env(served))
    term.read_until("nothing can be confirmed: undo is blocked")
    assert term.finish() == 1
    assert '"edited later"' in term.text  # the current value the undo would overwrite
    assert "blocked: the resource changed after this job applied it" in term.text
    assert server.write_count(SERVED_PATH) == writes


# -- issue 17 item 5: what a newcomer met in the CLI ---------------------------------


def test_jobs_list_of_an_unknown_agent_is_an_error(served: dict[str, Any]) -> None:
    listed = cli("jobs", "list", "--agent", "nobody", env=reviewer_env(served))
    assert listed.returncode == 2
    assert "error [not_found]: no agent 'nobody' in the config" in listed.stderr
    assert listed.stdout == ""
    over_api = httpx.get(
        f"{served['url']}/api/v1/jobs?agent=nobody",
        headers={"Authorization": f"Bearer {served['operator']}"},
        timeout=30,
    )
    assert over_api.status_code == 404
    assert over_api.json()["error"]["code"] == "not_found"


def test_a_gateway_url_without_a_scheme_says_so() -> None:
    env = {**os.environ, "UNDOGATE_URL": "127.0.0.1:8080", "UNDOGATE_KEY": "ugo_x"}
    result = cli("jobs", "list", "--agent", "account-assistant", env=env)
    assert result.returncode == 2
    assert "is missing the scheme (http:// or https://)" in result.stderr
    assert "://" + ":" not in result.stderr and "refusing to send a key to ://" not in result.stderr


def test_keys_list_is_a_table_with_dates(served: dict[str, Any]) -> None:
    listed = cli("keys", "list", "--config", str(served["config"]), env=served["env"])
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == [
        "id", "kind", "owner", "agent", "scopes", "label", "created", "revoked"
    ]  # fmt: skip
    agent_row = next(line for line in lines[1:] if line.split()[1] == "agent")
    assert str(served["owner"]) in agent_row and "account-assistant" in agent_row
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", agent_row)
    assert agent_row.rstrip().endswith("no")
    assert not re.search(r"\d{10}\.\d", listed.stdout)  # no epoch floats
    assert "{" not in listed.stdout
    as_json = cli("keys", "list", "--json", "--config", str(served["config"]), env=served["env"])
    assert as_json.returncode == 0 and '"credentials"' in as_json.stdout


def test_serve_without_a_config_suggests_init(tmp_path: Path) -> None:
    missing = tmp_path / "undogate.yaml"
    result = cli("serve", "--config", str(missing), "--port", "1")
    assert result.returncode == 2
    assert f"run `undogate init --config {missing}`" in result.stderr
    assert "serving" not in result.stderr


LONG = "123456789012345678901234567890123456789012345678901234567890.000000000000000000001"
WORDS = "a-very-long-note-" * 8


def test_exact_json_is_never_wrapped_mid_number_or_mid_word(
    served: dict[str, Any], server: ContractServer
) -> None:
    body = (
        '{"summary": "Long", "changes": [{"resource": "customer", '
        f'"set": {{"balance": {LONG}, "notes": "{WORDS}"}}, "assertion_kind": "observed"}}]}}'
    )
    job = prepare(served, body)
    env = reviewer_env(served)  # not a terminal: rich lays out for 80 columns
    for args in (("jobs", "show", job), ("apply", job, "--dry-run")):
        shown = cli(*args, env=env)
        assert shown.returncode == 0, shown.stderr
        assert LONG in shown.stdout and WORDS in shown.stdout
    assert server.write_count(SERVED_PATH) == 0


def test_a_put_body_is_shown_as_its_lines_never_rewrapped() -> None:
    out = io.StringIO()
    console = Console(file=out, width=40, highlight=False)
    text = "one\n" + WORDS + "\n\u200bthree"
    put = {"method": "PUT", "url": "http://127.0.0.1/docs/notes.md", "headers": {}, "body": text}
    _render_requests(console, [request_view(put)])
    shown = out.getvalue()
    assert "PUT http://127.0.0.1/docs/notes.md" in shown
    assert f"body: {len(text.encode())} bytes, 3 lines" in shown
    assert f"  | one\n  | {WORDS}\n  | \u27e8U+200B\u27e9three\n" in shown
    assert "(no newline at the end)" in shown
    assert "U+000A" not in shown and "\\x0a" not in shown
