"""The reviewer's terminal for undos offered only once verified (docs/collections.md): what a test
copy verified for a resource, and accepting it, once, with a typed answer."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from rich.console import Console
from rich.text import Text

from ..api.gateway_client import ApiClient
from .review import Ask

_WORDS = {
    "undo_of_create": "undo of a create (DELETE exactly the created record, If-Match)",
    "recreate": "undo of a delete (re-create the same id, If-None-Match: *)",
}


def _names(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def accept_undo(
    client: ApiClient, console: Console, resource_id: str, *, interactive: bool, ask: Ask
) -> int:
    """Show what the latest check verified; accept it after a typed "accept"."""
    base = f"/api/v1/resources/{quote(resource_id, safe='')}"
    offer = client.request("GET", f"{base}/undo-offer")
    assert isinstance(offer, dict)
    verified, accepted = _names(offer.get("verified")), _names(offer.get("accepted"))
    console.print(Text(f"undos of {resource_id}", style="bold"))
    if not verified:
        console.print(
            "nothing is verified: run `undogate check-endpoint` on a test copy of it first; "
            "until then creates and deletes are irreversible",
            style="yellow",
        )
        return 1
    for name in verified:
        mark = "accepted" if name in accepted else "verified, not accepted"
        console.print(Text(f"  {_WORDS.get(name, name)}: {mark}"))
    if set(verified) <= set(accepted):
        console.print("already accepted: these undos are offered", style="green")
        return 0
    if offer.get("passkey_challenge") is not None:
        # A terminal cannot sign; the requirement is never downgraded to a typed answer.
        console.print(
            Text(
                f"accepting the verified undo of {resource_id} needs your passkey, which this "
                f"terminal cannot give. Open {client.url}/resources/{quote(resource_id, safe='')}"
                "/undo in a browser and accept it there with your passkey",
                style="bold yellow",
            )
        )
        return 1
    if not interactive:
        console.print("refusing to accept without an interactive terminal", style="red")
        return 2
    answer = ask(f'Type "accept" to offer these undos of {resource_id} from now on').strip()
    if answer != "accept":
        console.print("cancelled: nothing changed", style="yellow")
        return 1
    done = client.request("POST", f"{base}/undo-acceptance", {})
    assert isinstance(done, dict)
    console.print(
        Text(f"accepted: {', '.join(_names(done.get('accepted')))} (recorded in the ledger)"),
        style="bold green",
    )
    return 0
