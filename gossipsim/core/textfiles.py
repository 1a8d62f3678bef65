"""User text files (scenarios, observation and graph files): read as UTF-8 or refused in one line
naming the key, the file and where the first byte that is not text is; paths shown shortened; a
path argument checked before any file is opened (:func:`checked_path`)."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

from gossipsim.errors import ConfigError


def shown_path(path: str | os.PathLike[str], limit: int = 120) -> str:
    """A path as error messages show it: quoted, and shortened in the middle when longer than
    ``limit`` characters (a 5,000-character path would drown the one-line message)."""
    text = os.fspath(path)
    if len(text) > limit:
        keep = (limit - 5) // 2
        text = f"{text[:keep]}[...]{text[-keep:]}"
    return repr(text)


#: what the file system answers for a path that cannot name a file at all (not "it does not exist")
_UNUSABLE_PATH = {errno.ENAMETOOLONG, errno.ELOOP, errno.EINVAL}


def checked_path(value: Any, key: str) -> Path:
    """``value`` as a :class:`~pathlib.Path` when it is a text path (``str`` or ``os.PathLike``
    of ``str``) the file system can look up (it may not exist); else a one-line
    :class:`ConfigError` naming ``key``: another type (None, a number, bytes), a NUL byte, a name
    too long for the file system, a loop of symbolic links."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise ConfigError(
            key, f"expected a path (str or os.PathLike), got {type(value).__name__} {value!r:.80}"
        )
    if not value.strip():
        raise ConfigError(key, "must name a file or folder (got an empty name)")
    try:
        os.stat(value)
    except ValueError as exc:  # a NUL byte
        raise ConfigError(key, f"cannot use the path {shown_path(value)}: {exc}") from None
    except OSError as exc:
        if exc.errno in _UNUSABLE_PATH:
            raise ConfigError(
                key, f"cannot use the path {shown_path(value)}: {exc.strerror or exc}"
            ) from None
    return Path(value)


_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def read_text(path: str | Path, key: str) -> str:
    """The text of a user file that must be UTF-8 (scenario, data), or a one-line
    :class:`ConfigError` naming ``key`` (:func:`decode_text`)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except (OSError, ValueError) as exc:  # missing, unreadable, a name too long, a NUL byte
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ConfigError(key, f"cannot read {shown_path(p)}: {reason}") from None
    return decode_text(raw, key, p.name)


def decode_text(raw: bytes, key: str, name: str) -> str:
    """``raw`` decoded as UTF-8, without a leading byte-order mark (Excel writes one); an error
    naming ``key``, the file and where the first byte that is not UTF-8 text is (line and column,
    1-based) for any other encoding or a binary file."""
    if raw.startswith(_UTF8_BOM):
        raw = raw[len(_UTF8_BOM) :]
    if raw.startswith(_UTF16_BOMS):
        raise ConfigError(key, f"{name} is UTF-16 (or UTF-32) text; save it as UTF-8")
    nul = raw.find(b"\0")
    if nul >= 0:
        line, column = _position(raw, nul)
        raise ConfigError(
            key,
            f"{name} is not a text file: a NUL byte at line {line}, column {column} (binary, or "
            "UTF-16 without a byte-order mark); save it as UTF-8 text",
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, column = _position(raw, exc.start)
        raise ConfigError(
            key,
            f"{name} is not UTF-8 text: byte 0x{raw[exc.start]:02x} at line {line}, column "
            f"{column}; save the file as UTF-8",
        ) from None
    return text


def _position(raw: bytes, offset: int) -> tuple[int, int]:
    """Line and column (1-based; the column counts bytes) of byte ``offset``."""
    line_start = raw.rfind(b"\n", 0, offset) + 1
    return raw.count(b"\n", 0, offset) + 1, offset - line_start + 1
