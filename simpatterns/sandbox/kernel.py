"""What the kernel gives the sandbox: namespaces, a uid per candidate, a seccomp allow-list.

The fork server (`simpatterns.sandbox.server`) calls `enter_namespaces` once
at start and `become_init` to be pid 1 of its own pid namespace; each
candidate child calls `confine` before it reads its job. Which protections a
machine gets (`Protection`):

- **root**: pid, IPC, mount, UTS and network namespaces; the child
  ``chroot``s into an empty read-only directory and runs as its own
  unprivileged uid (`candidate_uid`: no two live candidates share one), with
  the seccomp allow-list.
- **userns** (not root, user namespaces allowed): the same namespaces inside
  a user namespace (only the caller's own uid is mapped, so candidates share
  one uid; the pid namespace and the seccomp filter, which forbids every
  signal and ``ptrace``, keep them apart), chroot, capabilities dropped, seccomp.
- **none** (not root, no user namespaces): rlimits, own session and seccomp
  only. Below the minimum (`Protection.meets_minimum`): the sandbox refuses
  to run untrusted code there unless told ``unsafe`` (``--unsafe-sandbox``).

Nothing here is imported by the parent except `Protection`; the module is
loaded in the server's isolated interpreter before numpy's fork.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import time
from dataclasses import asdict, dataclass, field
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38

NAMESPACES = {"pid": CLONE_NEWPID, "ipc": CLONE_NEWIPC, "mount": CLONE_NEWNS, "uts": CLONE_NEWUTS,
              "net": CLONE_NEWNET}
MINIMUM_NAMESPACES = frozenset({"pid", "ipc", "mount", "net"})
NOBODY = 65534
# Candidate uids: UID_BASE + (slot << 12) + (candidate serial mod 4096), the slot being the
# server's pid mod 2**18, so servers of concurrent jobs use different ranges; far above any
# account a system creates, below 2**31.
UID_BASE = 0x40000000
UID_SPAN = 4096
SLOTS = 1 << 18

# Everything a detector (Python + numpy arithmetic on arrays already in memory) needs
# once its job is read; anything else fails with EPERM. No open/openat, socket, SysV
# IPC, kill, ptrace, fork/clone/exec, mount, unshare/setns, keyctl, bpf, personality,
# io_uring, userfaultfd, perf_event_open, chroot, set*id, prctl, ...
ALLOWED_SYSCALLS = (
    "read", "write", "readv", "writev", "pread64", "pwrite64", "close", "lseek", "fstat", "newfstatat", "statx",
    "fcntl", "dup",  # numpy's print path and Python's io inspect their own descriptors
    "mmap", "munmap", "mremap", "mprotect", "brk", "madvise",
    "futex", "sched_yield", "sched_getaffinity", "getcpu",
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack",
    "getpid", "gettid", "getppid", "getuid", "geteuid", "getgid", "getegid", "getpgrp",
    "clock_gettime", "clock_getres", "gettimeofday", "time", "nanosleep", "clock_nanosleep",
    "getrusage", "getrlimit", "prlimit64", "getrandom", "uname", "getcwd",
    "exit", "exit_group", "restart_syscall",
)
DENIED_ERRNO = errno.EPERM


@dataclass(frozen=True)
class Protection:
    """What confines a candidate on this machine (reported by the fork server)."""

    mode: str  # "root", "userns" or "none"
    namespaces: tuple[str, ...] = ()
    chroot: bool = False
    distinct_uids: bool = False
    seccomp: bool = False
    detail: str = ""  # why something is missing
    failures: tuple[str, ...] = field(default=())

    @property
    def meets_minimum(self) -> bool:
        """The stated minimum for untrusted code: pid, IPC, mount and network namespaces,
        the chroot and the seccomp allow-list."""
        return self.seccomp and self.chroot and MINIMUM_NAMESPACES <= set(self.namespaces)

    def missing(self) -> list[str]:
        out = [f"{ns} namespace" for ns in sorted(MINIMUM_NAMESPACES - set(self.namespaces))]
        if not self.chroot:
            out.append("chroot")
        if not self.seccomp:
            out.append("seccomp filter")
        return out

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Protection":
        return cls(str(d.get("mode", "none")), tuple(d.get("namespaces", ())), bool(d.get("chroot")),
                   bool(d.get("distinct_uids")), bool(d.get("seccomp")), str(d.get("detail", "")),
                   tuple(d.get("failures", ())))


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def enter_namespaces(use_namespaces: bool = True) -> tuple[str, list[str], str]:
    """Unshare the server into new pid (for its children), IPC, mount, UTS and network
    namespaces: directly as root, inside a new user namespace otherwise. Returns
    (mode, namespaces entered, why not when none)."""
    if not use_namespaces:
        return "none", [], "namespaces switched off"
    libc = _libc()
    flags = CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWNET
    if os.geteuid() == 0:
        if libc.unshare(flags) == 0:
            return "root", sorted(NAMESPACES), ""
        return "none", [], f"unshare failed as root: {os.strerror(ctypes.get_errno())}"
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(CLONE_NEWUSER | flags) != 0:
        return "none", [], f"no user namespaces for uid {uid}: {os.strerror(ctypes.get_errno())}"
    try:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"0 {uid} 1")
        _write("/proc/self/gid_map", f"0 {gid} 1")
    except OSError as exc:
        return "none", [], f"user namespace without a uid map: {exc.strerror}"
    return "userns", sorted(NAMESPACES), ""


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when ``parent`` ends (``parent`` forked it from its only thread:
    the kernel's parent-death signal fires on that thread's end); exit now if it already
    has (this process was re-parented before the signal was set)."""
    _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(0)


def become_init(job_pid: int | None = None) -> None:
    """Fork once so the caller continues as pid 1 of the pid namespace `enter_namespaces`
    created (when its init dies, the kernel kills every process left in it). The original
    process waits for it and exits with its status: the parent's kill of the process group
    reaches both, and so does the end of process ``job_pid`` (the job that started it)."""
    from simpatterns.parallel import END_GRACE_S, JobWatch

    pid = os.fork()
    if pid == 0:  # no getppid() check: the parent is outside this pid namespace, so it reads 0
        _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        return
    for fd in range(3, 64):  # keep no pipe end open: the parent must see EOF when the server dies
        try:
            os.close(fd)
        except OSError:
            pass
    # No thread here (after unshare(CLONE_NEWPID) this process cannot start one): the wait
    # for the child polls the job between short waits. When the job ends, the child gets
    # SIGTERM (the server cleans up and exits) and, should it not exit within END_GRACE_S,
    # this process exits and the child, pid 1 of the namespace, dies with it (SIGKILL)
    watch = JobWatch(job_pid) if job_pid is not None else None
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    deadline: float | None = None
    while True:
        try:
            done, status = os.waitpid(pid, 0 if watch is None else os.WNOHANG)
        except InterruptedError:
            continue
        if done:
            break
        if deadline is None and watch is not None and watch.ended(0.1):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + END_GRACE_S
        elif deadline is not None:
            if time.monotonic() > deadline:
                os._exit(1)
            time.sleep(0.01)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF if os.WIFEXITED(status) else 1)


def host_pid() -> int:
    """This process's pid as the machine (the /proc we were started with) sees it."""
    try:
        return int(os.readlink("/proc/self"))
    except (OSError, ValueError):
        return os.getpid()


def candidate_uid(server_pid: int, serial: int) -> int:
    """The unprivileged uid of candidate ``serial`` of the server with (host) pid ``server_pid``."""
    return uid_range(server_pid)[serial % UID_SPAN]


def uid_range(server_pid: int) -> range:
    """The uids the candidates of the server with (host) pid ``server_pid`` run as (root)."""
    base = UID_BASE + ((server_pid % SLOTS) << 12)
    return range(base, base + UID_SPAN)


class SeccompFilter:
    """The allow-list, built once in the server (libseccomp via pyseccomp) and loaded in each child."""

    def __init__(self) -> None:
        import pyseccomp

        default = pyseccomp.KILL_PROCESS if os.environ.get("SECCOMP_DEBUG_KILL") else pyseccomp.ERRNO(DENIED_ERRNO)
        self._filter = pyseccomp.SyscallFilter(default)
        for name in ALLOWED_SYSCALLS:
            try:
                self._filter.add_rule(pyseccomp.ALLOW, name)
            except (OSError, RuntimeError, ValueError):  # a syscall this architecture lacks
                continue

    def load(self) -> None:
        self._filter.load()  # also sets no_new_privs


def make_filter() -> tuple[SeccompFilter | None, str]:
    try:
        return SeccompFilter(), ""
    except Exception as exc:  # noqa: BLE001 - no libseccomp, no pyseccomp, or no seccomp in the kernel
        return None, f"no seccomp filter ({type(exc).__name__}: {exc})"


def drop_capabilities() -> None:
    """Clear this process's capability sets (the server is root in its user namespace)."""

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    libc = _libc()
    header = Header(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (Data * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def confine(jail: str, mode: str, uid: int | None, seccomp: SeccompFilter | None) -> None:
    """Confine the calling child (run after fork, before the job is read); raises on failure."""
    if mode in ("root", "userns"):
        os.chroot(jail)
        os.chdir("/")
    else:
        os.chdir(jail)
    if mode == "root":
        # RLIMIT_NPROC is not enforced for root and root reads every file: drop to a uid of our own
        assert uid is not None
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    elif mode == "userns":
        drop_capabilities()
    _libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def seal(seccomp: SeccompFilter | None) -> None:
    """The last step of confinement: from here on only the allow-listed system calls work."""
    if seccomp is not None:
        seccomp.load()
