"""Passkeys in real Chromium (SPEC §14), with the DevTools virtual authenticator:
register one on the passkeys page; confirm with user verification → applied; without
it → refused, nothing written; one preview's assertion used for another → refused; a
replay → refused; after revoking → refused. Accepting a verified undo (SPEC §12) on
its page asks the passkey too.

WebAuthn needs a secure context and a relying party id that is a domain: the pages
are opened on ``http://localhost:PORT`` (an IP address cannot be a relying party id).
Screenshots land in test-artifacts/web/ (docs/screenshots/ with
UNDOGATE_UPDATE_SCREENSHOTS=1).
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from undogate.config import Config
from undogate.contract_server import ContractServer
from undogate.jobs import JobState
from undogate.operations.undo_offer import resource_undo_offer

from .browser import (
    RECORD,
    ServedApp,
    WebWorld,
    chromium_missing,
    prepare_body,
    prepare_via_api,
    save_shot,
    served,
    web_world,
)
from .collections_world import record_passing_check
from .conftest import cli
from .test_web_browser import TIMEOUT_MS
from .worlds import LocalGateway

pytestmark = pytest.mark.skipif(chromium_missing() is not None, reason=chromium_missing() or "")

# The same serialization as web/static/passkey.js, without the submit: the test keeps
# the assertion to hand it to another form (a replay, another preview).
SIGN = """async (discourage) => {
  const field = document.querySelector("input[data-passkey-options]");
  const o = JSON.parse(field.getAttribute("data-passkey-options"));
  const bytes = (t) => Uint8Array.from(atob(t.replace(/-/g, "+").replace(/_/g, "/")
      + "===".slice((t.length + 3) % 4)), (c) => c.charCodeAt(0)).buffer;
  const text = (b) => btoa(String.fromCharCode(...new Uint8Array(b)))
      .replace(/\\+/g, "-").replace(/\\//g, "_").replace(/=+$/, "");
  const cred = await navigator.credentials.get({publicKey: {
    challenge: bytes(o.challenge), rpId: o.rpId,
    allowCredentials: o.allowCredentials.map((c) => ({type: c.type, id: bytes(c.id)})),
    userVerification: discourage ? "discouraged" : o.userVerification}});
  return JSON.stringify({id: cred.id, rawId: text(cred.rawId), type: cred.type, response: {
    authenticatorData: text(cred.response.authenticatorData),
    clientDataJSON: text(cred.response.clientDataJSON),
    signature: text(cred.response.signature)}, clientExtensionResults: {}});
}"""
SUBMIT = """(assertion) => {
  const field = document.querySelector("input[data-passkey-options]");
  field.value = assertion;
  field.form.submit();
}"""


class Reviewer:
    """One browser tab signed in as alice on ``http://localhost``, with a virtual
    authenticator that verifies its user until told otherwise."""

    def __init__(self, browser: Any, site: ServedApp, world: WebWorld) -> None:
        self.url = site.url.replace("127.0.0.1", "localhost")
        self.world = world
        self.context = browser.new_context()
        self.page = self.context.new_page()
        self.page.set_default_timeout(TIMEOUT_MS)
        self.cdp = self.context.new_cdp_session(self.page)
        self.cdp.send("WebAuthn.enable")
        self.authenticator = self.cdp.send(
            "WebAuthn.addVirtualAuthenticator",
            {
                "options": {
                    "protocol": "ctap2",
                    "transport": "internal",
                    "hasResidentKey": True,
                    "hasUserVerification": True,
                    "isUserVerified": True,
                    "automaticPresenceSimulation": True,
                }
            },
        )["authenticatorId"]
        self.page.goto(f"{self.url}/signin")
        self.page.get_by_label("Operator key").fill(world.keys["alice"])
        self.page.get_by_role("button", name="Sign in").click()
        self.page.wait_for_url(f"{self.url}/agents")

    def user_verified(self, verified: bool) -> None:
        self.cdp.send(
            "WebAuthn.setUserVerified",
            {"authenticatorId": self.authenticator, "isUserVerified": verified},
        )

    def preview(self, job_id: str, verb: str = "apply") -> None:
        self.page.goto(f"{self.url}/jobs/{job_id}")
        self.page.get_by_role("button", name=f"Preview {verb}").click()
        self.page.wait_for_url(f"{self.url}/jobs/{job_id}/previews/**")

    def sign(self, *, discourage_verification: bool = False) -> str:
        signed = self.page.evaluate(SIGN, discourage_verification)
        assert isinstance(signed, str)
        return signed

    def submit(self, assertion: str) -> str:
        """Send this page's Confirm with ``assertion``; the refusal's words."""
        self.page.evaluate(SUBMIT, assertion)
        self.page.wait_for_selector("main h1")
        return str(self.page.inner_text("main"))


def prepare(site: ServedApp, world: WebWorld, status: str) -> str:
    body = prepare_body()
    body["changes"][0]["set"] = {"status": status}
    with httpx.Client(base_url=site.url, timeout=30, trust_env=False) as client:
        return prepare_via_api(client, world.keys["agent"], body)


def state(world: WebWorld, job_id: str) -> JobState:
    job = world.gateway.ledger.load_job(job_id)
    assert job is not None
    return job.state


def test_passkeys_approve_exact_previews_in_chromium(
    browser: Any,
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
    tmp_path: Path,
) -> None:
    world = web_world(server, data_dir, open_gateway, require_passkey=True)
    with served(world.app) as site:
        you = Reviewer(browser, site, world)
        page = you.page

        # register
        page.goto(f"{you.url}/passkeys")
        page.get_by_label("Name it").fill("laptop")
        page.get_by_role("button", name="Register a passkey").click()
        page.wait_for_selector("text=Passkey “laptop” registered")
        assert [
            p.label for p in world.gateway.ledger.read(lambda tx: tx.passkeys(world.ids["alice"]))
        ] == ["laptop"]
        save_shot(page, "passkeys", docs=True)

        # confirm with user verification → applied (the page's own script signs)
        first = prepare(site, world, "customer")
        you.preview(first)
        assert "needs your passkey" in page.inner_text("#passkey-status")
        save_shot(page, "passkey-preview", docs=True)
        page.get_by_role("button", name="Confirm apply").click()
        page.wait_for_url(f"{you.url}/jobs/{first}/receipt")
        assert state(world, first) is JobState.APPLIED
        assert server.write_count(RECORD) == 1

        # the assertion of one preview used for another → refused, nothing written
        second = prepare(site, world, "vip")
        you.preview(second)
        other_preview = you.sign()
        you.preview(second)
        words = you.submit(other_preview)
        assert "for another preview" in words
        assert state(world, second) is JobState.PREPARED and server.write_count(RECORD) == 1
        save_shot(page, "passkey-refused")

        # approve that preview exactly → applied; then a replay → refused
        page.go_back()
        approved = you.sign()
        you.submit(approved)
        page.wait_for_url(f"{you.url}/jobs/{second}/receipt")
        assert state(world, second) is JobState.APPLIED and server.write_count(RECORD) == 2
        you.preview(second, "undo")
        assert "used already" in you.submit(approved)
        assert state(world, second) is JobState.APPLIED and server.write_count(RECORD) == 2

        # without user verification → refused, nothing written: the browser refuses to
        # ask for less than the page requires, and the server refuses what it gets
        page.go_back()
        you.user_verified(False)
        page.get_by_role("button", name="Confirm undo").click()
        page.wait_for_selector("#passkey-status[data-state=refused]")
        assert "nothing was sent" in page.inner_text("#passkey-status")
        unverified = you.sign(discourage_verification=True)
        assert "did not hold" in you.submit(unverified)
        assert state(world, second) is JobState.APPLIED and server.write_count(RECORD) == 2
        you.user_verified(True)

        # after revoking the passkey → refused
        page.go_back()
        signed_before = you.sign()
        other_tab = you.context.new_page()
        other_tab.goto(f"{you.url}/passkeys")
        other_tab.get_by_role("button", name="Revoke").click()
        other_tab.wait_for_selector("text=Passkey revoked")
        assert "was revoked" in you.submit(signed_before)
        assert state(world, second) is JobState.APPLIED and server.write_count(RECORD) == 2
        you.preview(second, "undo")
        assert "you have none" in page.inner_text("#passkey-status")

        # the receipt of what was approved, handed over and checked without the ledger
        receipt = tmp_path / "receipt.json"
        exported = cli("export-receipt", second, "--ledger", str(data_dir), "-o", str(receipt))
        assert exported.returncode == 0, exported.stderr
        checked = cli("verify-receipt", str(receipt))
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "passkey_approved" in receipt.read_text()
        bundle = json.loads(receipt.read_text())
        page.set_content(
            _terminal(f"$ undogate verify-receipt {second}.receipt.json", checked.stdout, bundle)
        )
        save_shot(page, "receipt-verified", docs=True)
        you.context.close()


def test_accepting_a_verified_undo_asks_the_passkey_in_chromium(
    browser: Any,
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
) -> None:
    world = web_world(server, data_dir, open_gateway, require_passkey=True)
    record_passing_check(world.gateway, world.gateway.config, "notes", ("undo_of_create",))
    with served(world.app) as site:
        you = Reviewer(browser, site, world)
        page = you.page
        page.goto(f"{you.url}/resources/notes/undo")
        assert "you have none" in page.inner_text("#passkey-status")
        page.goto(f"{you.url}/passkeys")
        page.get_by_role("button", name="Register a passkey").click()
        page.wait_for_selector("text=registered")

        # without user verification → refused by the browser, nothing accepted
        page.goto(f"{you.url}/resources/notes/undo")
        assert "exactly this acceptance" in page.inner_text("#passkey-status")
        you.user_verified(False)
        page.get_by_role("button", name="Accept the verified undo").click()
        page.wait_for_selector("#passkey-status[data-state=refused]")
        assert resource_undo_offer(world.gateway, "notes").accepted == frozenset()

        # with it → accepted, and the approval is in the chain
        you.user_verified(True)
        page.goto(f"{you.url}/resources/notes/undo")
        page.get_by_role("button", name="Accept the verified undo").click()
        page.wait_for_selector("text=Accepted: these verified undos are offered from now on.")
        assert resource_undo_offer(world.gateway, "notes").accepted == {"undo_of_create"}
        verified = cli("ledger", "verify", str(data_dir))
        assert verified.returncode == 0, verified.stdout + verified.stderr
        you.context.close()


def _terminal(command: str, output: str, bundle: Any) -> str:
    """The CLI's answer as a terminal would show it, for the docs' screenshot."""
    approvals = [
        json.loads(e["event"]["detail"])
        for e in bundle["segment"]
        if e.get("event", {}).get("operation") == "passkey_approved"
    ]
    lines = [command, *output.rstrip().splitlines()]
    lines += ["", f"$ jq '.segment[].event.operation' {bundle['job_id']}.receipt.json"]
    lines += [json.dumps(e["event"]["operation"]) for e in bundle["segment"] if "event" in e]
    if approvals:
        lines += ["", "approved preview (the digest the passkey signed):"]
        lines += json.dumps(approvals[0]["preview"], indent=1).splitlines()
    body = html.escape("\n".join(lines))
    return (
        "<html><body style='margin:0;background:#111;color:#e6e6e6'>"
        f"<pre style='font:14px/1.45 monospace;padding:18px;white-space:pre-wrap'>{body}</pre>"
        "</body></html>"
    )
