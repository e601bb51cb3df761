"""What the contract server serves: resources, the seed they start from, and their files.

A resource is a JSON record (``/records/<stem>``) or a UTF-8 text document
(``/docs/<name>``) with a generation; its strong ETag names the generation and a digest
of its bytes. With a data directory every resource lives in a file, written atomically,
and a small state file keeps the generations, so an ETag survives a restart exactly when
the bytes are unchanged.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..digests import sha256_hex
from ..jsonvalue import JsonError, JsonObject, JsonValue, dumps, loads_object
from ..net.etag import ETag

RECORD_MEDIA_TYPE = "application/json"
MERGE_PATCH_MEDIA_TYPE = "application/merge-patch+json"
TEXT_MEDIA_TYPES = frozenset({"text/plain", "text/markdown"})
STATE_FILE = ".undogate-contract-state.json"

Kind = Literal["record", "text"]

_SEED_FILES: dict[str, str] = {
    "customer-123.json": """{
  "id": "123",
  "name": "Ada Lovelace",
  "status": "lead",
  "owner": "sam",
  "tier": null,
  "balance": 123456789012345678901234567890,
  "ratio": 0.1000000000000000055511151231257827,
  "notes": {"source": "web"}
}
""",
    "wrapped-7.json": """{
  "data": {"status": "open", "owner": "kim", "priority": 2},
  "meta": {"rev": 1}
}
""",
    "notes.md": """# Account notes

- Ada prefers email before noon.
- Renewal is due in **March**.
""",
    "plain.txt": "Plain text, kept byte for byte.\nSecond line.\n",
}


class ContractDataError(ValueError):
    """A seed file (or a helper's input) is not a record or text document we can serve."""


@dataclass(slots=True)
class Resource:
    kind: Kind
    body: bytes
    media_type: str
    generation: int
    document: JsonObject | None = None
    file: Path | None = None
    opaque: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self.opaque = _opaque(self.generation, self.media_type, self.body)

    @property
    def etag(self) -> ETag:
        return ETag(self.opaque)


@dataclass(frozen=True, slots=True)
class Seed:
    kind: Kind
    body: bytes
    media_type: str
    file: Path | None


def _opaque(generation: int, media_type: str, body: bytes) -> str:
    return f"g{generation}-{_digest(media_type, body)[:16]}"


def _digest(media_type: str, body: bytes) -> str:
    return sha256_hex(media_type.encode("utf-8") + b"\n" + body)


def record_body(document: JsonObject) -> bytes:
    return dumps(document, sort_keys=False).encode("utf-8")


def merge_patch(target: JsonValue, patch: JsonValue) -> JsonValue:
    """RFC 7396 section 2's MergePatch(Target, Patch), as the RFC writes it."""
    if not isinstance(patch, dict):
        return patch
    result: JsonObject = dict(target) if isinstance(target, dict) else {}
    for name, value in patch.items():
        if value is None:
            result.pop(name, None)
        else:
            result[name] = merge_patch(result.get(name), value)
    return result


def parse_media_type(value: str) -> tuple[str, dict[str, str]]:
    main, *params = value.split(";")
    parsed: dict[str, str] = {}
    for param in params:
        name, sep, val = param.strip().partition("=")
        if not sep:
            continue
        parsed[name.strip().lower()] = val.strip().strip('"')
    return main.strip().lower(), parsed


def acceptable_text_type(value: str) -> bool:
    main, params = parse_media_type(value)
    if main not in TEXT_MEDIA_TYPES:
        return False
    if not params:
        return True
    return set(params) == {"charset"} and params["charset"].lower() == "utf-8"


def _default_text_type(filename: str) -> str:
    return "text/markdown" if filename.endswith(".md") else "text/plain"


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.chmod(tmp, stat.S_IMODE(path.stat().st_mode))
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def seed_demo(data_dir: Path) -> list[Path]:
    """Write the built-in demo resources into ``data_dir`` (created if missing).

    ``customer-123.json`` and ``wrapped-7.json`` become ``/records/<stem>``;
    ``notes.md`` and ``plain.txt`` become ``/docs/<name>``.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, text in _SEED_FILES.items():
        target = data_dir / name
        _atomic_write(target, text.encode("utf-8"))
        written.append(target)
    return written


def _load_seed_file(name: str, data: bytes, file: Path | None) -> tuple[str, Seed] | None:
    where = str(file) if file is not None else name
    if name.endswith(".json"):
        try:
            document = loads_object(data)
        except JsonError as exc:
            raise ContractDataError(f"{where}: {exc}") from exc
        stem = name[: -len(".json")]
        return f"/records/{stem}", Seed("record", record_body(document), RECORD_MEDIA_TYPE, file)
    if name.endswith((".txt", ".md")):
        try:
            data.decode("utf-8", errors="strict")
        except UnicodeDecodeError as exc:
            raise ContractDataError(f"{where}: not valid UTF-8 at byte {exc.start}") from exc
        return f"/docs/{name}", Seed("text", data, _default_text_type(name), file)
    return None


def _has_resource_files(data_dir: Path) -> bool:
    if not data_dir.is_dir():
        return False
    return any(
        not p.name.startswith(".") and p.name.endswith((".json", ".txt", ".md"))
        for p in data_dir.iterdir()
    )


def _load_seeds(data_dir: Path | None) -> dict[str, Seed]:
    seeds: dict[str, Seed] = {}
    if data_dir is None:
        for name, text in _SEED_FILES.items():
            loaded = _load_seed_file(name, text.encode("utf-8"), None)
            if loaded is not None:
                seeds[loaded[0]] = loaded[1]
        return seeds
    for file in sorted(data_dir.iterdir()):
        if file.name.startswith(".") or not file.is_file():
            continue
        loaded = _load_seed_file(file.name, file.read_bytes(), file)
        if loaded is not None:
            seeds[loaded[0]] = loaded[1]
    return seeds


class ResourceStore:
    """Every resource by path, persisted first when it has a file.

    ``lock`` is the contract server's one lock; callers hold it around a lookup and the
    write it guards, and ``commit`` takes it (re-entrantly) itself.

    Raises:
        ContractDataError: a seed file is malformed (at construction).
    """

    def __init__(self, data_dir: Path | None, lock: threading.RLock) -> None:
        self.data_dir = data_dir
        self.lock = lock
        self.resources: dict[str, Resource] = {}
        self._counter = 0
        if self.data_dir is not None and not _has_resource_files(self.data_dir):
            seed_demo(self.data_dir)
        self.seeds = _load_seeds(self.data_dir)
        self._load_initial_state()

    def get(self, path: str, kind: Kind | None = None) -> Resource:
        """Raises: KeyError: no resource (of ``kind``) at ``path``."""
        resource = self.resources.get(path)
        if resource is None or (kind is not None and resource.kind != kind):
            raise KeyError(path)
        return resource

    def file_for(self, path: str, kind: Kind) -> Path | None:
        if self.data_dir is None:
            return None
        prefix = "/records/" if kind == "record" else "/docs/"
        name = path[len(prefix) :] if path.startswith(prefix) else ""
        if not name or "/" in name or name.startswith("."):
            return None
        if kind == "record":
            return self.data_dir / f"{name}.json"
        return self.data_dir / name if name.endswith((".txt", ".md")) else None

    def commit(
        self,
        path: str,
        kind: Kind,
        body: bytes,
        media_type: str,
        document: JsonObject | None,
        file: Path | None,
    ) -> Resource:
        """Store a new representation with a fresh generation; persist it first."""
        with self.lock:
            generation = self._counter + 1
            resource = Resource(kind, body, media_type, generation, document, file)
            if file is not None:
                _atomic_write(file, body)
            self._counter = generation
            self.resources[path] = resource
            with contextlib.suppress(OSError):
                self._save_state()
            return resource

    def reset(self) -> None:
        """Back to the seed data, with new ETags; resources made since are deleted."""
        with self.lock:
            for path, resource in list(self.resources.items()):
                if path not in self.seeds:
                    if resource.file is not None:
                        resource.file.unlink(missing_ok=True)
                    del self.resources[path]
            for path, seed in self.seeds.items():
                document = loads_object(seed.body) if seed.kind == "record" else None
                self.commit(path, seed.kind, seed.body, seed.media_type, document, seed.file)

    def _load_initial_state(self) -> None:
        state: dict[str, Any] = {}
        if self.data_dir is not None:
            state_file = self.data_dir / STATE_FILE
            with contextlib.suppress(OSError, ValueError):
                loaded = json.loads(state_file.read_text("utf-8"))
                if isinstance(loaded, dict):
                    state = loaded
        known = state.get("resources", {})
        counter = state.get("counter", 0)
        self._counter = counter if isinstance(counter, int) else 0
        fresh: list[tuple[str, Seed]] = []
        for path, seed in self.seeds.items():
            entry = known.get(path) if isinstance(known, dict) else None
            media_type = seed.media_type
            if seed.kind == "text" and isinstance(entry, dict):
                recorded = entry.get("media_type")
                if isinstance(recorded, str) and acceptable_text_type(recorded):
                    media_type = recorded
            digest = _digest(media_type, seed.body)
            generation = entry.get("generation") if isinstance(entry, dict) else None
            if (
                isinstance(entry, dict)
                and entry.get("digest") == digest
                and isinstance(generation, int)
                and 0 < generation <= self._counter
            ):
                document = loads_object(seed.body) if seed.kind == "record" else None
                self.resources[path] = Resource(
                    seed.kind, seed.body, media_type, generation, document, seed.file
                )
            else:
                fresh.append((path, Seed(seed.kind, seed.body, media_type, seed.file)))
        for path, seed in fresh:
            self._counter += 1
            document = loads_object(seed.body) if seed.kind == "record" else None
            self.resources[path] = Resource(
                seed.kind, seed.body, seed.media_type, self._counter, document, seed.file
            )
        self._save_state()

    def _save_state(self) -> None:
        if self.data_dir is None:
            return
        state = {
            "counter": self._counter,
            "resources": {
                path: {
                    "generation": res.generation,
                    "digest": _digest(res.media_type, res.body),
                    "media_type": res.media_type,
                }
                for path, res in sorted(self.resources.items())
                if res.file is not None
            },
        }
        data = json.dumps(state, indent=1, sort_keys=True).encode("utf-8")
        _atomic_write(self.data_dir / STATE_FILE, data)
