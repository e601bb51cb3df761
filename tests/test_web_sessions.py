"""A review session's notice for the next page lives in the ledger: the only way to
leave one is ``SessionStore.notify`` (setting it on one request's ``Session`` object,
where no other request or process would see it, is refused outright)."""

from __future__ import annotations

from pathlib import Path

import pytest

from undogate.auth import Principal
from undogate.ledger import Ledger
from undogate.web.sessions import SessionStore


def test_a_notice_crosses_to_the_next_request_once_and_only_through_the_store(
    tmp_path: Path,
) -> None:
    ledger = Ledger.open(tmp_path)
    try:
        sessions = SessionStore(ledger, idle_s=600, absolute_s=3600)
        sid, session = sessions.create(Principal("op_alice", "operator", owner_id="op_alice"))
        with pytest.raises(AttributeError):
            session.notice = "lost at the redirect"  # type: ignore[attr-defined]
        sessions.notify(session, "Rejected 2 of 2 jobs.")
        following = sessions.get(sid)
        assert following is not None and following.take_notice() == "Rejected 2 of 2 jobs."
        again = sessions.get(sid)
        assert again is not None and again.take_notice() is None  # shown once
    finally:
        ledger.close()
