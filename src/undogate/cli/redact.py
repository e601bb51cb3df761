"""Defence in depth for tokens: scrub their values from every log record.

Tokens never reach a log line by design (adapters read them at dispatch and put them
only in the ``Authorization`` header; errors name the variable, never the value). This
filter is the second line: it replaces the current value of each configured token
variable, its base64 form (what ``Basic`` auth sends for ``user:password``) and, for a
``user:password`` value, the password alone, with ``[redacted]``; and the secret part of
anything shaped like an undogate key (``auth.KEY_SHAPE``), which a client may send where
a name goes (a job id in a path, a resource in a body) for a refusal to quote.

Values are read from the environment each time a record is filtered, so a rotated
token is scrubbed without reinstalling anything.
"""

from __future__ import annotations

import base64
import logging
import os
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from ..auth import KEY_SHAPE

REDACTED = "[redacted]"
_MIN_PASSWORD_CHARS = 6  # below this a password alone is too common a string to scrub


def secret_forms(value: str) -> list[str]:
    """Every spelling of one token value worth scrubbing, longest first."""
    if not value:
        return []
    forms = {value, base64.b64encode(value.encode("utf-8")).decode("ascii")}
    _, colon, password = value.partition(":")
    if colon and len(password) >= _MIN_PASSWORD_CHARS:
        forms.add(password)
    return sorted(forms, key=len, reverse=True)


class RedactSecrets(logging.Filter):
    """A ``logging.Filter`` that scrubs token values from a record's message and traces.

    Attach it to handlers, or use ``install_redaction`` to cover every record created
    anywhere in the process. It never drops a record.
    """

    def __init__(
        self, variable_names: Iterable[str], environ: Mapping[str, str] | None = None
    ) -> None:
        super().__init__()
        self.variable_names = tuple(dict.fromkeys(variable_names))
        self._environ = environ

    def secrets(self) -> list[str]:
        environ = os.environ if self._environ is None else self._environ
        forms: set[str] = set()
        for name in self.variable_names:
            forms.update(secret_forms(environ.get(name, "")))
        return sorted(forms, key=len, reverse=True)

    def redact(self, text: str, secrets: list[str] | None = None) -> str:
        for secret in self.secrets() if secrets is None else secrets:
            text = text.replace(secret, REDACTED)
        return KEY_SHAPE.sub(rf"\g<id>{REDACTED}", text)

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = self.secrets()
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: scrub what it carries
            message = f"{record.msg} {record.args!r}"
        clean = self.redact(message, secrets)
        if clean != message:
            record.msg = clean
            record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text, secrets)
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info, secrets)
        return True


_installed: list[RedactSecrets] = []
_install_lock = threading.Lock()
_previous_factory: Any = None


def _redacting_factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
    record: logging.LogRecord = _previous_factory(*args, **kwargs)
    for redaction in tuple(_installed):
        redaction.filter(record)
    return record


def install_redaction(
    variable_names: Iterable[str], environ: Mapping[str, str] | None = None
) -> RedactSecrets:
    """Scrub the values of ``variable_names`` from every log record made from now on.

    Works at record creation (``logging.setLogRecordFactory``), so it covers every
    logger and every handler, including handlers configured later (uvicorn's). Returns
    the filter; pass it to ``uninstall_redaction`` to remove it.
    """
    global _previous_factory
    redaction = RedactSecrets(variable_names, environ)
    with _install_lock:
        if not _installed:
            _previous_factory = logging.getLogRecordFactory()
            logging.setLogRecordFactory(_redacting_factory)
        _installed.append(redaction)
    return redaction


def uninstall_redaction(redaction: RedactSecrets) -> None:
    """Remove one ``install_redaction``; the last removal restores the record factory."""
    global _previous_factory
    with _install_lock:
        if redaction in _installed:
            _installed.remove(redaction)
        if not _installed and _previous_factory is not None:
            if logging.getLogRecordFactory() is _redacting_factory:
                logging.setLogRecordFactory(_previous_factory)
            _previous_factory = None


__all__ = [
    "REDACTED",
    "RedactSecrets",
    "install_redaction",
    "secret_forms",
    "uninstall_redaction",
]
