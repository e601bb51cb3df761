"""The reference endpoint: an HTTP server that honours undogate's remote contract exactly.

It serves JSON records (GET, conditional JSON Patch, JSON Merge Patch or PUT) and UTF-8
text documents (GET, conditional PUT) at arbitrary paths, gives every successful write a
new strong ETag, and can be told to misbehave in precise ways (faults) so the gateway's
handling of uncertain outcomes can be exercised against a real socket. The demo and the
tests start it in-process on 127.0.0.1; ``undogate contract-server`` runs it in the
foreground.

All state sits behind one lock: an ``If-Match`` comparison and the write it guards happen
under that lock, so a stale writer can never slip in between.

Inside, each arrow points down:

- ``server``: ``ContractServer`` (lifecycle, in-process helpers, control routes, the
  token) and ``serve_forever``;
- ``writes``: how a read or a conditional write is answered;
- ``faults``: the faults it can be told to commit, and the armed ones;
- ``resources``: resources, the demo seed and their files;
- ``httpd``: the HTTP server and handler, which know nothing of the above.
"""

from .faults import IF_MATCH_FAULTS, READ_FAULTS, WRITE_FAULTS
from .httpd import MAX_BODY_BYTES
from .resources import ContractDataError, seed_demo
from .server import ContractServer, WriteGate, serve_forever

__all__ = [
    "IF_MATCH_FAULTS",
    "MAX_BODY_BYTES",
    "READ_FAULTS",
    "WRITE_FAULTS",
    "ContractDataError",
    "ContractServer",
    "WriteGate",
    "seed_demo",
    "serve_forever",
]
