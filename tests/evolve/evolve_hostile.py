"""The hostile corpus: candidate detectors that try to escape, hang, flood or break the job.

Each entry: (name, detect body, reasons acceptable with the AST gate, reasons acceptable when the
gate is bypassed and only the sandbox stands). Side effects are checked by the tests (marker
files, processes, SysV IPC objects, sentinel processes, the measured time). ``MARKER`` is
replaced with a path the test owns, ``SENTINELS`` with a list of pids the candidate must not
be able to signal.

`KERNEL` holds what an attacker who read our code would try: reaching the fork server's
module globals without an import or an underscore (a generator's ``gi_frame.f_back``, a
``match`` class pattern reading ``__class__``), and from there SysV IPC, signals to other
processes, replacing the clock the child times itself with, and writing straight into the
result pipe. `NUMPY` exhausts resources through numpy alone; `RESULTS` sends the parent results
as large as the limits allow, and lists it would parse into many times their size.
"""

HEAD = '''import numpy as np
PATTERN = "{label}"
DESCRIPTION = "hostile"
DEPENDS = []
PARAMS = ["object"]
'''

# A route to the os module that needs no import statement (for the gate-bypassed runs).
FIND_OS = (
    "    mods = [c for c in ().__class__.__base__.__subclasses__() if c.__name__ == '_wrap_close']\n"
    "    os = mods[0].__init__.__globals__['sys'].modules['os'] if mods else None\n"
)

CORPUS = [
    ("write_file", "    open('MARKER', 'w').write('pwned')\n    return []",
     {"forbidden_name"}, {"exception"}),
    ("write_file_numpy", "    np.save('MARKER', np.zeros(3))\n    return []",
     {"forbidden_attribute"}, {"exception"}),
    ("read_passwd", "    t = open('/etc/passwd').read()\n    return [(0, {'object': t[:50]})]",
     {"forbidden_name"}, {"exception"}),
    ("read_passwd_numpy", "    t = np.loadtxt('/etc/passwd', dtype=str, delimiter='\\n')\n"
     "    return [(0, {'object': str(t[0])})]", {"forbidden_attribute"}, {"exception"}),
    ("read_api_key", "    import os\n    return [(0, {'object': os.environ.get('OPENAI_API_KEY', 'none')})]",
     {"forbidden_import"}, {"exception"}),
    ("read_api_key_sneaky", FIND_OS + "    k = os.environ.get('OPENAI_API_KEY', 'none')\n"
     "    return [(0, {'object': 'key:' + k})]", {"forbidden_attribute"}, {"unknown_object"}),
    ("socket", "    import socket\n    s = socket.create_connection(('1.1.1.1', 80), timeout=1)\n    return []",
     {"forbidden_import"}, {"exception"}),
    ("subprocess", "    import subprocess\n    subprocess.run(['touch', 'MARKER'])\n    return []",
     {"forbidden_import"}, {"exception"}),
    ("os_system", "    import os\n    os.system('touch MARKER')\n    return []",
     {"forbidden_import"}, {"exception"}),
    ("os_system_sneaky", FIND_OS + "    rc = os.system('touch MARKER')\n"
     "    return [(0, {'object': 'rc' + str(rc)})]", {"forbidden_attribute"}, {"unknown_object"}),
    ("fork_bomb", FIND_OS + "    while True:\n        os.fork()",
     {"forbidden_attribute"}, {"exception"}),
    ("allocate_20gb", "    a = np.ones(int(20e9 / 8))\n    return [(0, {'object': 'ground'})]",
     {"memory"}, {"memory"}),
    ("infinite_loop", "    while True:\n        pass", {"timeout", "cpu_limit"}, {"timeout", "cpu_limit"}),
    ("deep_recursion", "    def f(n):\n        return f(n + 1)\n    return f(0)", {"recursion"}, {"recursion"}),
    ("print_100mb", "    print('x' * 100_000_000)\n    return []", {"output_limit"}, {"output_limit"}),
    ("signal_handlers", "    import signal\n    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n    while True:\n        pass",
     {"forbidden_import"}, {"exception"}),
    ("signal_handlers_sneaky", FIND_OS + "    sig = os.sys.modules['signal']\n"
     "    for s in (sig.SIGTERM, sig.SIGINT, sig.SIGXCPU, sig.SIGALRM):\n        sig.signal(s, sig.SIG_IGN)\n"
     "    while True:\n        pass", {"forbidden_attribute"}, {"timeout", "cpu_limit"}),
    ("sys_exit", "    import sys\n    sys.exit(3)", {"forbidden_import"}, {"exception"}),
    ("sys_exit_sneaky", FIND_OS + "    os.sys.exit(3)", {"forbidden_attribute"}, {"exited"}),
    ("os_exit", "    import os\n    os._exit(0)", {"forbidden_import"}, {"exception"}),
    ("os_exit_sneaky", FIND_OS + "    os._exit(0)", {"forbidden_attribute"}, {"exited"}),
    ("base_exception", "    raise BaseException('stop the job')", {"base_exception"}, {"base_exception"}),
    ("nan_frames", "    return [(float('nan'), {'object': 'ground'})]", {"invalid_events"}, {"invalid_events"}),
    ("unknown_params", "    return [(0, {'object': 'ground', 'secret': 1})]", {"unknown_params"}, {"unknown_params"}),
    ("million_events", "    return [(0, {'object': 'ground'})] * 1_000_000", {"too_many_events"}, {"too_many_events"}),
    ("import_ctypes", "    import ctypes\n    ctypes.CDLL(None).system(b'touch MARKER')\n    return []",
     {"forbidden_import"}, {"exception"}),
]


# Routes to the fork server's module globals that passed the old gate (no import, no
# underscore attribute, no forbidden name); each leaves the server module's globals in ``glb``.
FRAME_GLOBALS = (
    "    def walk():\n"
    "        yield gen.gi_frame.f_back\n"
    "    gen = walk()\n"
    "    frame = next(gen)\n"
    "    while 'check_events' not in frame.f_globals:\n"  # up to the server's module, however deep
    "        frame = frame.f_back\n"
    "    glb = frame.f_globals\n"
)
MATCH_GLOBALS = (
    "    glb = None\n"
    "    match ():\n"
    "        case object(__class__=object(__base__=object(__subclasses__=subclasses))):\n"
    "            for c in subclasses():\n"
    "                match c:\n"
    "                    case object(__name__='_wrap_close', __init__=object(__globals__=g)):\n"
    "                        glb = g['sys'].modules['simpatterns.sandbox.server'].__dict__\n"
)
SYSV_IPC = (
    "    libc = glb['sys'].modules['ctypes'].CDLL(None)\n"
    "    ids = [libc.shmget(0, 32 << 20, 0o1666), libc.msgget(0, 0o1666), libc.semget(0, 1, 0o1666)]\n"
    "    return [(0, {'object': 'ipc ' + str(ids)})]"
)
SIGNALS = (
    "    os = glb['os']\n"
    "    hit = []\n"
    "    for pid in SENTINELS + [-1]:\n"
    "        try:\n"
    "            os.kill(pid, 9)\n"
    "            hit.append(pid)\n"
    "        except Exception:\n"
    "            pass\n"
    "    return [(0, {'object': 'killed ' + str(hit)})]"
)
# replace the clock the child times detect with, then burn ~0.3 s of CPU
FORGED_CLOCK = (
    "    start = glb['time'].perf_counter()\n"
    "    glb['time'].perf_counter = lambda: start\n"
    "    x = 0\n"
    "    for i in range(3_000_000):\n"
    "        x += i\n"
    "    return [(int(np.argmax(trace.speed()[:, -1])), {'object': trace.names[-1]})]"
)
# write straight into the result pipe (``w`` in the server's _run_candidate frame)
PIPE_HUGE_HEADER = (
    "    os = glb['os']\n"
    "    os.write(frame.f_locals['w'], b'R' + (2 ** 62).to_bytes(8, 'big'))\n"
    "    os._exit(0)"
)
PIPE_JSON_BOMB = (
    "    os = glb['os']\n"
    "    w = frame.f_locals['w']\n"
    "    bomb = b'[' * 200000\n"
    "    os.write(w, b'E' + len(bomb).to_bytes(8, 'big') + bomb)\n"
    "    ok = b'{\"times\":{}}'\n"
    "    os.write(w, b'R' + len(ok).to_bytes(8, 'big') + ok)\n"
    "    os._exit(0)"
)
PIPE_FLOOD = (
    "    os = glb['os']\n"
    "    w = frame.f_locals['w']\n"
    "    os.write(w, b'R' + (1 << 20).to_bytes(8, 'big'))\n"
    "    while True:\n"
    "        os.write(w, b'x' * 65536)"
)
# any outcome but "ok": what the kernel-level tests check is the side effect
SIDE_EFFECT_ONLY = {"unknown_object", "exception", "invalid_events", "degenerate_constant", "degenerate_never",
                    "degenerate_always", "duplicate", "registered", "ok", "output_too_large", "sandbox_error",
                    "exited", "crashed", "timeout", "cpu_limit"}

KERNEL = [
    ("frame_sysv_ipc", FRAME_GLOBALS + SYSV_IPC, {"forbidden_attribute"}, {"unknown_object"}),
    ("match_sysv_ipc", MATCH_GLOBALS + SYSV_IPC, {"forbidden_attribute"}, {"unknown_object"}),
    ("frame_signals", FRAME_GLOBALS + SIGNALS, {"forbidden_attribute"}, {"unknown_object"}),
    ("match_signals", MATCH_GLOBALS + SIGNALS, {"forbidden_attribute"}, {"unknown_object"}),
    ("frame_forged_clock", FRAME_GLOBALS + FORGED_CLOCK, {"forbidden_attribute"}, SIDE_EFFECT_ONLY),
    ("pipe_huge_header", FRAME_GLOBALS + PIPE_HUGE_HEADER, {"forbidden_attribute"}, {"output_too_large"}),
    ("pipe_json_bomb", FRAME_GLOBALS + PIPE_JSON_BOMB, {"forbidden_attribute"}, {"invalid_events"}),
    ("pipe_flood", FRAME_GLOBALS + PIPE_FLOOD, {"forbidden_attribute"}, {"output_too_large", "invalid_events"}),
    ("traceback_frames", "    try:\n        1 / 0\n    except ZeroDivisionError as e:\n"
     "        tb = e.with_traceback(None)\n    g = (i for i in [1])\n    c = g.gi_code.co_consts\n    return []",
     {"forbidden_attribute"}, {"ok", "degenerate_never"}),
]
NUMPY = [
    ("numpy_empty_terabyte", "    a = np.empty((10 ** 6, 10 ** 6))\n    return []", {"memory"}, {"memory"}),
    ("numpy_tile_bomb", "    a = np.tile(np.arange(10), 10 ** 10)\n    return []", {"memory"}, {"memory"}),
    ("numpy_outer_bomb", "    v = np.arange(10 ** 6, dtype=float)\n    return [(int(np.outer(v, v).sum()) % 2, {})]",
     {"memory"}, {"memory"}),
]

# Results that attack the parent's memory: each as large as the limits let it be. With the gate:
# lists of body names (the schema allows them) up to the result cap, and past it; without: empty
# lists straight into the result pipe (3 bytes of JSON, 64 of Python object each when parsed).
PIPE_EMPTY_LISTS = (
    "    os = glb['os']\n"
    "    w = frame.f_locals['w']\n"
    "    bomb = b'{\"0\":[' + b'[],' * 1_300_000 + b'[]]}'\n"
    "    os.write(w, b'E' + len(bomb).to_bytes(8, 'big') + bomb)\n"
    "    ok = b'{\"times\":{\"0\":0.0},\"steps\":{\"0\":0}}'\n"
    "    os.write(w, b'R' + len(ok).to_bytes(8, 'big') + ok)\n"
    "    os._exit(0)"
)
RESULTS = [
    ("result_near_cap", "    names = [trace.names[-1]] * 12\n"
     "    return [(f % trace.num_frames, {'object': names}) for f in range(4000)]",
     SIDE_EFFECT_ONLY | {"too_many_events"}, SIDE_EFFECT_ONLY | {"too_many_events"}),
    ("result_past_cap", "    names = [trace.names[-1]] * 100\n"
     "    return [(f % trace.num_frames, {'object': names}) for f in range(4000)]",
     {"output_too_large"}, {"output_too_large"}),
    # invalid_events: counted before parsing (a small result cap stops it earlier, in the server)
    ("pipe_empty_lists", FRAME_GLOBALS + PIPE_EMPTY_LISTS, {"forbidden_attribute"},
     {"invalid_events", "output_too_large"}),
]


def program(label: str, body: str, marker: str, name: str = "", sentinels: list[int] | None = None) -> str:
    """A full detector module; ``name`` goes into a comment inside detect (it survives answer parsing)."""
    tag = f"    # hostile: {name}\n" if name else ""
    body = body.replace("MARKER", marker).replace("SENTINELS", repr(list(sentinels or [])))
    return HEAD.format(label=label) + "\n\ndef detect(trace, events):\n" + tag + body + "\n"
