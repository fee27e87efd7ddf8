"""The hostile corpus: candidate detectors that try to escape, hang, flood or break the job.

Each entry: (name, detect body, reasons acceptable with the AST gate, reasons acceptable when the
gate is bypassed and only the sandbox stands). Side effects are checked by the tests (marker
files, processes). ``MARKER`` is replaced with a path the test owns.
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
    ("infinite_loop", "    while True:\n        pass", {"timeout"}, {"timeout", "cpu_limit"}),
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


def program(label: str, body: str, marker: str, name: str = "") -> str:
    """A full detector module; ``name`` goes into a comment inside detect (it survives answer parsing)."""
    tag = f"    # hostile: {name}\n" if name else ""
    return HEAD.format(label=label) + "\n\ndef detect(trace, events):\n" + tag + body.replace("MARKER", marker) + "\n"
