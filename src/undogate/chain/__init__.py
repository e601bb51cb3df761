"""The ledger's hash chain, as pure functions: one canonical encoding of an event row,
and the link that ties each row to the one before it (docs/proof.md spells it out).

A row's **body digest** is the SHA-256 of its columns as one JSON array (ASCII only,
no spaces, a float in its shortest round-trip form, the detail as the exact text the
ledger stored); its **hash** is the SHA-256 of ``undogate.chain/1``, the hash of the
row before it, its job id (empty for none) and its body digest. Linking through the
body digest lets a receipt carry the rows of other jobs between its own as digests
only: the links still check and nothing of those jobs is handed over, while the job id
in the link keeps a receipt from passing off one of its own job's rows as another's.

Pure: the ledger (``ledger/sql_chain.py``) computes a link inside the write that
inserts the row, ``undogate ledger verify`` recomputes every link, and a receipt's
verifier recomputes its own segment, all with these functions. ``seals`` holds what the
chain records of the rows outside it (a change's sides, a credential) and the checks
that hold those rows to it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

#: The ``prev_hash`` of the first row of a ledger.
GENESIS = "0" * 64
_BODY_TAG = "undogate.event/1"
_LINK_TAG = b"undogate.chain/1"


@dataclass(frozen=True)
class ChainedRow:
    """An event row's columns as the chain covers them (``id`` only names the row)."""

    job_id: str | None
    at: float
    actor: str
    access_path: str
    operation: str
    target: str | None
    from_state: str | None
    to_state: str | None
    detail: str | None  # the stored JSON text, byte for byte


def body_digest(row: ChainedRow) -> str:
    """The SHA-256 (hex) of the row's canonical encoding."""
    body = [
        _BODY_TAG,
        row.job_id,
        row.at,
        row.actor,
        row.access_path,
        row.operation,
        row.target,
        row.from_state,
        row.to_state,
        row.detail,
    ]
    text = json.dumps(body, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def link(prev_hash: str, job_id: str | None, digest: str) -> str:
    """The hash of a row of job ``job_id`` whose predecessor's hash is ``prev_hash`` and
    whose body digest is ``digest``."""
    before, after = link_around(job_id, digest)
    return hashlib.sha256(before + prev_hash.encode() + after).hexdigest()


def link_around(job_id: str | None, digest: str) -> tuple[bytes, bytes]:
    """What a link's SHA-256 reads before and after the predecessor's hash (ASCII hex):
    the tag, then the job id (empty for none) and the body digest, each part on a line
    of its own. A database that reads the head itself hashes ``before``, the head and
    ``after``, and gets what ``link`` computes."""
    return _LINK_TAG + b"\n", b"\n" + (job_id or "").encode() + b"\n" + digest.encode()


def row_hash(prev_hash: str, row: ChainedRow) -> str:
    """The hash a row must carry after ``prev_hash``."""
    return link(prev_hash, row.job_id, body_digest(row))


__all__ = ["GENESIS", "ChainedRow", "body_digest", "link", "link_around", "row_hash"]
