"""One command at a time on a results folder: an OS file lock held for the whole command.

Every command that writes a results folder (``gossipsim run``, ``--resume``, ``gs.run(...,
out=DIR)``, :meth:`gossipsim.Results.write`) locks ``DIR/.gossipsim/lock`` with ``flock``
(exclusive, not waiting) before it reads the folder's state and holds it until it ends. A second
command on the folder is refused in one line naming the holder's process id, which the lock file
holds. The kernel releases the lock when its process dies (``kill -9`` included), so a lock is
never stale: the file left by a killed process is locked again by the next command. Worker
processes forked while a lock is held close their copy of it (a worker never holds its parent's
folder).

``gossipsim status`` asks, without waiting, whether the lock is held (:func:`holder`); a command
that finds the lock held retries for :data:`RETRY_SECONDS` before refusing, so that such a look
cannot refuse it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from types import TracebackType

from gossipsim.errors import ConfigError

META = ".gossipsim"  # the folder's bookkeeping directory (as gossipsim.results.store names it)
LOCK_NAME = "lock"
#: how long a command retries a held lock before refusing (a ``status`` looks at it for a moment)
RETRY_SECONDS = 0.5
_HELD: set[int] = set()  # descriptors of the locks this process holds (closed in forked children)

if sys.platform == "win32":  # pragma: no cover - POSIX here
    import msvcrt

    def _try_lock(fd: int, shared: bool = False) -> bool:
        os.lseek(fd, 0, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        with contextlib.suppress(OSError):
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try_lock(fd: int, shared: bool = False) -> bool:
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _close_held_in_child() -> None:
    """A forked worker drops its copies of the parent's locks (the parent keeps them)."""
    for fd in list(_HELD):
        with contextlib.suppress(OSError):
            os.close(fd)
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_held_in_child)


def lock_path(folder: str | os.PathLike[str]) -> Path:
    return Path(folder) / META / LOCK_NAME


def in_use_message(folder: Path, pid: int | None) -> str:
    who = f"process {pid}" if pid else "another process"
    return (
        f"{str(folder)!r} is in use by another gossipsim command ({who}); wait for it to finish "
        f"(gossipsim status {folder}) or stop it, then try again"
    )


def _read_pid(fd: int) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 32).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None
    return None


def holder(folder: str | os.PathLike[str]) -> int | None:
    """The process id of the command holding ``folder``'s lock (0 if it is held but the file does
    not say by whom), or None if no command holds it. Nothing is created or waited for."""
    try:
        fd = os.open(lock_path(folder), os.O_RDONLY)
    except OSError:
        return None
    try:
        if _try_lock(fd, shared=True):
            _unlock(fd)
            return None
        return _read_pid(fd) or 0
    finally:
        os.close(fd)


class FolderLock:
    """The lock of results folder ``folder`` (a context manager). :meth:`acquire` creates the
    folder and its bookkeeping directory if need be (remembering which it made), takes the lock
    or raises a one-line :class:`ConfigError` for ``key``; :meth:`release` removes the lock file
    and the folders it made that are still empty, so a refused command leaves no trace."""

    def __init__(self, folder: str | os.PathLike[str], key: str) -> None:
        self.folder = Path(folder)
        self.path = lock_path(folder)
        self.key = key
        self._fd: int | None = None
        self._made: list[Path] = []

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        if self._fd is not None:
            return
        try:
            self._make_folders()
            fd = self._locked_file()
        except OSError as exc:
            self._remove_made()
            raise ConfigError(
                self.key,
                f"cannot write {str(self.path.parent)!r}: {exc.strerror or exc}; nothing was changed",
            ) from None
        except BaseException:
            self._remove_made()
            raise
        with contextlib.suppress(OSError):  # who holds it, for the refusal of others
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        _HELD.add(fd)

    def _make_folders(self) -> None:
        missing = []
        probe = self.path.parent
        while not os.path.lexists(probe) and probe != probe.parent:
            missing.append(probe)
            probe = probe.parent
        for folder in reversed(missing):
            try:
                folder.mkdir()
            except FileExistsError:
                continue  # made by another command meanwhile
            self._made.append(folder)

    def _locked_file(self) -> int:
        """A descriptor of the lock file, locked; the file is made if missing. A holder removes
        the file when it releases it, so the lock taken must be on the file now at the path."""
        deadline = time.monotonic() + RETRY_SECONDS
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            if not _try_lock(fd):
                pid = _read_pid(fd)
                os.close(fd)
                if time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                raise ConfigError(self.key, in_use_message(self.folder, pid))
            try:
                now = os.stat(self.path)
            except FileNotFoundError:
                now = None
            mine = os.fstat(fd)
            if now is not None and (now.st_ino, now.st_dev) == (mine.st_ino, mine.st_dev):
                return fd
            os.close(fd)  # released and removed by its holder meanwhile: lock the new file

    def release(self) -> None:
        """Give the lock up: the lock file is removed while still held (a command waiting on it
        finds it gone and makes its own), then the folders this lock made, if still empty."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        _HELD.discard(fd)
        with contextlib.suppress(OSError):
            os.close(fd)
        self._remove_made()

    def _remove_made(self) -> None:
        for folder in reversed(self._made):
            try:
                folder.rmdir()
            except FileNotFoundError:
                continue
            except OSError:  # written meanwhile (by this command): kept, and its parents
                break
        self._made = []

    def __enter__(self) -> FolderLock:
        self.acquire()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
