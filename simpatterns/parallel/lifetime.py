"""No worker outlives its job: `end_with_job` (called first thing in every process a job
starts), `JobWatch`, and `reap_with_job` (what a local Ray cluster's reaper runs)."""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
WATCH_POLL_S = 0.2  # how often a process without pidfds (macOS, BSD) looks at its job
END_GRACE_S = 0.5  # how long a process ended by a signal it handles may clean up before SIGKILL


def end_with_job(job_pid: int, *, parent_signal: bool = True, end_signal: int = signal.SIGKILL) -> None:
    """End this process (``end_signal``: SIGKILL, or a signal its handler cleans up on) as
    soon as process ``job_pid`` ends, however it ended (SIGKILL and the OOM killer
    included): call it first thing in a process the job started.

    Linux: the kernel's parent-death signal (``prctl(PR_SET_PDEATHSIG, SIGKILL)``), then a
    check that the parent is still ``job_pid``, which closes the race with a job that died
    before the signal was set. The signal fires when the *thread* that forked this process
    ends, so ``parent_signal=False`` where that may be a passing thread. When the parent is
    not the job (a fork server forked this process; the job already died) or without the
    signal, a daemon thread waits for the job to end (`JobWatch`). Windows: nothing."""
    if sys.platform == "win32":  # os.kill(pid, 0) sends Ctrl-C there: no probe to poll with
        return
    if parent_signal and _set_parent_death_signal(end_signal) and os.getppid() == job_pid:
        return
    watch = JobWatch(job_pid)
    threading.Thread(target=_end_when_ended, args=(watch, end_signal), name="end-with-job", daemon=True).start()


def _set_parent_death_signal(sig: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


class JobWatch:
    """Whether process ``job_pid`` has ended, for a process it started: on a pidfd (Linux
    5.3+: readable once the process has exited), else by polling every `WATCH_POLL_S`
    whether this process's parent changed (it was re-parented) or the pid is gone (macOS,
    BSD). Made before the job can have ended; a pidfd held from then on cannot be fooled
    by the pid's reuse."""

    def __init__(self, job_pid: int):
        self.pid = job_pid
        self._parent = os.getppid()
        self._fd: int | None = None
        self._ended = False
        opener = getattr(os, "pidfd_open", None)
        if opener is not None:
            try:
                self._fd = opener(job_pid)
            except ProcessLookupError:
                self._ended = True
            except OSError:  # a kernel before 5.3: poll
                pass

    def ended(self, timeout: float | None = None) -> bool:
        """Whether the job has ended, waiting up to ``timeout`` seconds for it (None: until it has)."""
        if not self._ended and self._fd is not None:
            self._ended = bool(select.select([self._fd], [], [], timeout)[0])
        elif not self._ended:
            deadline = None if timeout is None else time.monotonic() + timeout
            while os.getppid() == self._parent and _exists(self.pid):
                left = WATCH_POLL_S if deadline is None else min(WATCH_POLL_S, deadline - time.monotonic())
                if left <= 0:
                    return False
                time.sleep(left)
            self._ended = True
        return self._ended


def _end_when_ended(watch: JobWatch, sig: int) -> None:
    watch.ended()
    os.kill(os.getpid(), sig)
    if sig != signal.SIGKILL:  # its handler runs in the main thread; one stuck there is still ended
        time.sleep(END_GRACE_S)
        os.kill(os.getpid(), signal.SIGKILL)


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True



REAP_POLL_S = 1.0  # how often the reaper looks at the job's processes


def reap_with_job(job_pid: int) -> None:
    """Wait for process ``job_pid`` to end, however it ends, then SIGKILL every process that
    was under it when last looked at (a process's start time tells a reused pid apart)."""
    watch = JobWatch(job_pid)
    seen: list[tuple[int, str]] = []
    while True:
        seen = [(pid, start) for pid in _descendants(job_pid)
                if pid != os.getpid() and (start := _start_time(pid))] or seen
        if watch.ended(REAP_POLL_S):
            break
    for pid, start in seen:
        if _start_time(pid) == start:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _start_time(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return ""


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        kids = children.get(todo.pop(), [])
        out.extend(kids)
        todo.extend(kids)
    return out

