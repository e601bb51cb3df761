"""Passkeys in real Chromium (docs/proof.md), with the DevTools virtual authenticator:
enrol one on the passkeys page with the code from the host; confirm with user
verification → applied; without it → refused, nothing written; one preview's assertion
used for another → refused; a replay → refused; after revoking → refused. Accepting a
verified undo (docs/collections.md) on its page asks the passkey too. Another passkey is added,
and one revoked, only with a live one's approval: a stolen key in a browser of its own
(a session, an authenticator, no passkey of the owner's) can do neither.

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
from undogate.jobs import Actor, JobState
from undogate.operations import owner_passkeys
from undogate.operations.undo_offer import resource_undo_offer

from .browser import ServedApp, chromium_missing, save_shot, served
from .collections_world import record_passing_check
from .serving import cli
from .test_web_browser import TIMEOUT_MS
from .worlds import RECORD, LocalGateway, WebWorld, prepare_body, prepare_via_api, web_world

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
SUBMIT_INTO_CONFIRM = """(assertion) => {
  const form = document.querySelector("form[action$='/confirm']");
  const field = document.createElement("input");
  field.type = "hidden";
  field.name = "passkey_assertion";
  field.value = assertion;
  form.appendChild(field);
  form.submit();
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
        self.authenticator = self.add_authenticator()
        self.page.goto(f"{self.url}/signin")
        self.page.get_by_label("Operator key").fill(world.keys["alice"])
        self.page.get_by_role("button", name="Sign in").click()
        self.page.wait_for_url(f"{self.url}/inbox")

    def add_authenticator(self, transport: str = "internal") -> str:
        """Another authenticator in this browser (one built in, or a security key); its
        id."""
        options = {
            "protocol": "ctap2",
            "transport": transport,
            "hasResidentKey": True,
            "hasUserVerification": True,
            "isUserVerified": True,
            "automaticPresenceSimulation": True,
        }
        added = self.cdp.send("WebAuthn.addVirtualAuthenticator", {"options": options})
        return str(added["authenticatorId"])

    def enrol(self, label: str = "laptop") -> None:
        """The first passkey, with a code an operator printed on the host."""
        owner = self.world.ids["alice"]
        host = Actor(id="host", owner_id=owner, kind="system", access_path="cli")
        code = owner_passkeys.issue_enrolment(self.world.gateway, host, owner).code
        self.page.goto(f"{self.url}/passkeys")
        self.page.get_by_label("Enrolment code").fill(code)
        self.page.get_by_label("Name it").fill(label)
        self.page.get_by_role("button", name="Register a passkey").click()
        self.page.wait_for_selector(f"text=Passkey “{label}” registered")

    def add_passkey(self, label: str = "another") -> None:
        """Make another passkey on the passkeys page: up to the page that asks a live
        one to approve it."""
        self.page.goto(f"{self.url}/passkeys")
        self.page.get_by_label("Name it").fill(label)
        self.page.get_by_role("button", name="Add a passkey").click()
        self.page.wait_for_selector("text=Approve the new passkey")

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

        # enrol: without the code from the host, nothing is registered
        page.goto(f"{you.url}/passkeys")
        page.get_by_label("Enrolment code").fill("AAAA-BBBB-CCCC-DDDD-EEEE-FFFF")
        page.get_by_role("button", name="Register a passkey").click()
        page.wait_for_selector("main h1")
        assert "not one made for your key" in page.inner_text("main")
        assert world.gateway.ledger.read(lambda tx: tx.passkeys(world.ids["alice"])) == []
        you.enrol("laptop")
        assert [
            p.label for p in world.gateway.ledger.read(lambda tx: tx.passkeys(world.ids["alice"]))
        ] == ["laptop"]
        save_shot(page, "passkeys", docs=True)

        # confirm with user verification → applied (the page's own script signs)
        first = prepare(site, world, "customer")
        you.preview(first)
        assert "needs your passkey" in page.inner_text("#passkey-status")
        # It signs the requests the page shows: above it, as it says.
        assert "every request above" in page.inner_text("#passkey-status")
        requests_first = "(a, b) => a.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING"
        status = page.locator("#passkey-status").element_handle()
        assert page.locator(".requests").evaluate(requests_first, status)
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

        # after revoking the passkey (which approves its own revocation) → refused
        page.go_back()
        signed_before, held_preview = you.sign(), page.url
        page.goto(f"{you.url}/passkeys")
        page.get_by_role("button", name="Revoke").click()
        page.wait_for_selector("text=Passkey revoked")
        page.goto(held_preview)  # it asks no passkey now (none is live): send one anyway
        page.evaluate(SUBMIT_INTO_CONFIRM, signed_before)
        page.wait_for_selector("main h1")
        assert "was revoked" in page.inner_text("main")
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
        you.enrol()

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


def test_another_passkey_and_a_revocation_need_a_live_one_in_chromium(
    browser: Any,
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
) -> None:
    """Alice adds her phone (her laptop's passkey approves exactly it) and revokes the
    laptop (the phone approves). A thief with her key signs in in a browser of its own:
    the page's own step asks a passkey of alice's that its authenticator does not hold,
    and the forms sent without it, or signed by its own authenticator, are refused."""
    world = web_world(server, data_dir, open_gateway, require_passkey=True)
    alice = world.ids["alice"]
    with served(world.app) as site:
        you = Reviewer(browser, site, world)
        page = you.page
        you.enrol("laptop")
        [laptop] = world.gateway.ledger.read(lambda tx: tx.passkeys(alice))

        thief = Reviewer(browser, site, world)  # the same key, another browser
        thief.add_passkey()
        assert "Enrol your first passkey" not in thief.page.inner_text("main")
        thief.page.get_by_role("button", name="Approve with a passkey I have").click()
        thief.page.wait_for_selector("#passkey-status[data-state=refused]")
        signed = thief.page.evaluate(OWN_KEY)  # its own authenticator signs instead
        assert "not one of yours" in thief.submit(signed)
        thief.add_passkey()
        thief.page.evaluate(SEND_UNSIGNED)
        thief.page.wait_for_selector("main h1")
        assert "needs the approval of one of your live passkeys" in thief.page.inner_text("main")
        thief.page.goto(f"{thief.url}/passkeys")
        thief.page.evaluate(SEND_UNSIGNED)  # the laptop's Revoke, unsigned
        thief.page.wait_for_selector("main h1")
        assert "passkey_approval_required" in thief.page.inner_text("main")
        assert [
            (p.id, p.revoked_at) for p in world.gateway.ledger.read(lambda tx: tx.passkeys(alice))
        ] == [(laptop.id, None)]

        # a new authenticator makes the new passkey (the laptop's is away: a browser
        # never registers one authenticator twice); the laptop's passkey, back as a
        # security key, approves it
        held = you.cdp.send("WebAuthn.getCredentials", {"authenticatorId": you.authenticator})
        you.cdp.send("WebAuthn.removeVirtualAuthenticator", {"authenticatorId": you.authenticator})
        you.add_authenticator()
        you.add_passkey("phone")
        save_shot(page, "passkey-add")
        you.authenticator = you.add_authenticator("usb")
        for credential in held["credentials"]:
            you.cdp.send(
                "WebAuthn.addCredential",
                {"authenticatorId": you.authenticator, "credential": credential},
            )
        page.get_by_role("button", name="Approve with a passkey I have").click()
        page.wait_for_selector("text=Passkey “phone” registered")
        live = [
            p.label
            for p in world.gateway.ledger.read(lambda tx: tx.passkeys(alice))
            if p.revoked_at is None
        ]
        assert live == ["laptop", "phone"]

        # revoke the laptop: a live passkey approves it
        page.locator("form[action$='/revoke'] button").first.click()
        page.wait_for_selector("text=Passkey revoked")
        live = [
            p.label
            for p in world.gateway.ledger.read(lambda tx: tx.passkeys(alice))
            if p.revoked_at is None
        ]
        assert live == ["phone"]
        verified = cli("ledger", "verify", str(data_dir))
        assert verified.returncode == 0, verified.stdout + verified.stderr
        thief.context.close()
        you.context.close()


# A form that asks a passkey, signed by any passkey this browser's authenticator holds
# (no allowed list): what a thief's own authenticator would send.
OWN_KEY = """async () => {
  const field = document.querySelector("input[data-passkey-options]");
  const o = JSON.parse(field.getAttribute("data-passkey-options"));
  const bytes = (t) => Uint8Array.from(atob(t.replace(/-/g, "+").replace(/_/g, "/")
      + "===".slice((t.length + 3) % 4)), (c) => c.charCodeAt(0)).buffer;
  const text = (b) => btoa(String.fromCharCode(...new Uint8Array(b)))
      .replace(/\\+/g, "-").replace(/\\//g, "_").replace(/=+$/, "");
  const cred = await navigator.credentials.get({publicKey: {
    challenge: bytes(o.challenge), rpId: o.rpId, userVerification: "required"}});
  return JSON.stringify({id: cred.id, rawId: text(cred.rawId), type: cred.type, response: {
    authenticatorData: text(cred.response.authenticatorData),
    clientDataJSON: text(cred.response.clientDataJSON),
    signature: text(cred.response.signature)}, clientExtensionResults: {}});
}"""
# The first form that asks a passkey, sent as it is: no assertion.
SEND_UNSIGNED = """() => {
  document.querySelector("input[data-passkey-options]").form.submit();
}"""


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
