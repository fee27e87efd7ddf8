"""Every exception class simpatterns defines derives from `SimpatternsError` (and keeps
its builtin base), so ``except SimpatternsError`` catches whatever the library raises
on purpose."""

from __future__ import annotations

import importlib
import pkgutil

import simpatterns
from simpatterns.errors import SimpatternsError

# private control flow that never leaves its module: not part of the public API
ALLOWED = {
    "simpatterns.dsl.parser._Syntax": "parser-internal jump, caught in the same function",
    "simpatterns.dsl.parser._LexFailed": "parser-internal jump, caught in the same module",
    "simpatterns.dsl.checker._TooManyErrors": "checker-internal stop, caught in the same module",
    "simpatterns.llm.local_backend._Deadline": "raised in a llama.cpp callback, caught around the call",
}
OPTIONAL = {"llama_cpp", "ray", "torch", "stable_baselines3", "pyarrow", "minari", "datasets", "inspect_ai"}


def _modules():
    for info in pkgutil.walk_packages(simpatterns.__path__, "simpatterns."):
        if info.name.endswith("__main__"):
            continue  # runs its command on import
        try:
            yield importlib.import_module(info.name)
        except ModuleNotFoundError as exc:  # an optional extra that is not installed
            if (exc.name or "").split(".")[0] not in OPTIONAL:
                raise


def _exception_classes():
    seen = {}
    for module in _modules():
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__.startswith("simpatterns.")
            ):
                seen[f"{value.__module__}.{value.__qualname__}"] = value
    return seen


def test_every_exception_of_the_package_derives_from_simpatterns_error():
    classes = _exception_classes()
    assert len(classes) > 30  # every module was imported
    stray = sorted(
        name for name, cls in classes.items() if not issubclass(cls, SimpatternsError) and name not in ALLOWED
    )
    assert not stray, stray
    assert set(ALLOWED) <= set(classes)  # the allowlist names classes that exist


def test_each_keeps_its_builtin_base():
    from simpatterns.files import WriteError
    from simpatterns.trace import TraceFormatError

    assert issubclass(TraceFormatError, ValueError) and issubclass(WriteError, OSError)
    try:
        raise TraceFormatError("t.npz: no field 'pos'")
    except SimpatternsError as exc:
        assert "t.npz" in str(exc)
