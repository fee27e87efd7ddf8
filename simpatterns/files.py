"""One way to write a file: atomically, into a folder that is created if missing.

Every file simpatterns writes (traces, annotations, libraries' manifests,
reports, indexes, logs' snapshots) goes through `atomic_open` or one of its
wrappers: the data goes to a hidden temporary sibling first and is renamed
over the target only when complete, so a reader never sees half a file and
an interrupted write leaves the old file (or nothing) behind, never a
temporary one. Errors name the user's path, not the temporary file.

A process killed outright (SIGKILL, a power cut) cannot remove its temporary
file; the next write into that folder does (`sweep_stale`): a temporary
sibling is named ``.NAME.tmp-PID-HEX``, and one whose process is gone is
removed.

Caches are files too: `cache_dir` is the one place they go (``$SIMPATTERNS_CACHE``).
"""

from __future__ import annotations

import atexit
import json
import os
import re
import secrets
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterator

from simpatterns.errors import SimpatternsError


class WriteError(SimpatternsError, OSError):
    """A file could not be written; the message names the target path and why."""


CACHE_ENV = "SIMPATTERNS_CACHE"


def cache_dir(*parts: str) -> Path:
    """The folder of the cache ``parts`` (``cache_dir("menus")``): under ``$SIMPATTERNS_CACHE``,
    else ``$XDG_CACHE_HOME/simpatterns``, else ``~/.cache/simpatterns``. Every cache simpatterns
    keeps goes through here, so one variable moves them all. Not created here: writing creates it."""
    root = os.environ.get(CACHE_ENV)
    if not root:
        root = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "simpatterns")
    return Path(root, *parts)


# .NAME.tmp-PID-HEX (a file or, for a library, a folder); .NAME.old-PID-HEX (a folder moved aside)
_TEMPORARY = re.compile(r"^\..+\.(?:tmp|old)-(\d+)-[0-9a-f]+$")
_swept: set[str] = set()
# temporaries this process has open (path -> owner pid); removed at exit, so a Ctrl-C that lands
# between creating one and entering its cleanup cannot leave it behind
_open_temporaries: dict[Path, int] = {}


def _remove_open_temporaries() -> None:
    for tmp, pid in list(_open_temporaries.items()):
        if pid == os.getpid():  # never a parent's: forked children inherit the table
            try:
                tmp.unlink()
            except OSError:
                pass
            _open_temporaries.pop(tmp, None)


atexit.register(_remove_open_temporaries)


def temporary_sibling(path: str | os.PathLike, kind: str = "tmp") -> Path:
    """A hidden, unique sibling name for ``path`` (``kind`` "tmp" or "old") that
    `sweep_stale` recognises once its process is gone."""
    target = Path(path)
    return target.with_name(f".{target.name}.{kind}-{os.getpid()}-{secrets.token_hex(4)}")


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # someone else's process (or unknowable): leave its file alone
    return True


def sweep_stale(folder: str | os.PathLike) -> list[Path]:
    """Remove the temporary siblings in ``folder`` whose writing process is gone
    (left by a killed run); returns what was removed."""
    removed = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        m = _TEMPORARY.match(name)
        if m is None or _alive(int(m.group(1))):
            continue
        p = Path(folder) / name
        try:
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
            removed.append(p)
        except OSError:
            pass
    return removed


def _sweep_once(folder: Path) -> None:
    key = str(folder.resolve())
    if key not in _swept:
        _swept.add(key)
        sweep_stale(folder)


def check_target(path: str | os.PathLike) -> Path:
    """Raise `WriteError` now if ``path`` cannot be written as a file (it is a folder,
    or a file stands where a folder must go), creating nothing: a command checks its
    outputs before it works, not after."""
    target = Path(path)
    if target.is_dir():
        raise WriteError(f"{target}: is a directory; give a file name")
    for folder in target.parents:
        if folder.exists():
            if not folder.is_dir():
                raise WriteError(f"{target}: cannot create its folder {target.parent} ({folder} is a file)")
            if not os.access(folder, os.W_OK | os.X_OK):
                raise WriteError(f"{target}: cannot write in {folder} (permission denied)")
            break
    return target


def _check_target(path: Path) -> None:
    if path.is_dir():
        raise WriteError(f"{path}: is a directory; give a file name")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WriteError(f"{path}: cannot create its folder {path.parent} ({exc.strerror or exc})") from None
    if not path.parent.is_dir():
        raise WriteError(f"{path}: {path.parent} is not a folder")
    _sweep_once(path.parent)


@contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", *, encoding: str | None = "utf-8",
                fsync: bool = False) -> Iterator[IO[Any]]:
    """Open a temporary sibling of ``path`` for writing; on a clean exit it replaces
    ``path``, on any exception (Ctrl-C included) it is removed and ``path`` is untouched.

    ``mode`` is ``"w"`` (text) or ``"wb"`` (binary). ``fsync=True`` flushes to disk
    before the rename (for logs that must survive a power cut)."""
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb', got {mode!r}")
    target = Path(path)
    _check_target(target)
    tmp = temporary_sibling(target)
    _open_temporaries[tmp] = os.getpid()
    try:
        try:
            fh = open(tmp, mode, encoding=None if mode == "wb" else encoding)
        except OSError as exc:
            raise WriteError(f"{target}: cannot write ({exc.strerror or exc})") from None
        with fh:
            yield fh
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        if isinstance(exc, OSError) and not isinstance(exc, WriteError):
            raise WriteError(f"{target}: cannot write ({exc.strerror or exc})") from None
        raise
    finally:
        _open_temporaries.pop(tmp, None)


def atomic_write(path: str | os.PathLike, data: str | bytes, *, fsync: bool = False) -> Path:
    """Write ``data`` (text or bytes) to ``path`` atomically; returns the path."""
    with atomic_open(path, "wb" if isinstance(data, bytes) else "w", fsync=fsync) as fh:
        fh.write(data)
    return Path(path)


def atomic_write_json(path: str | os.PathLike, obj: Any, *, indent: int | None = 1,
                      default: Any = None, fsync: bool = False) -> Path:
    """``json.dumps(obj)`` written atomically, with a final newline."""
    return atomic_write(path, json.dumps(obj, indent=indent, default=default) + "\n", fsync=fsync)


def atomic_write_lines(path: str | os.PathLike, lines: Any, *, fsync: bool = False) -> Path:
    """Text lines (each without its newline) written atomically, one per line."""
    with atomic_open(path, "w", fsync=fsync) as fh:
        for line in lines:
            fh.write(line)
            fh.write("\n")
    return Path(path)
