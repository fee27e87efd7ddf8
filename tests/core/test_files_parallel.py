"""The atomic-write and parallel-map seams."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from simpatterns.files import WriteError, atomic_open, atomic_write, atomic_write_json, cache_dir
from simpatterns.parallel import (
    InlineExecutor,
    ProcessExecutor,
    WorkerSetup,
    make_executor,
    parallel_map,
    split_chunks,
)


def test_atomic_write_creates_folders_and_replaces(tmp_path):
    target = tmp_path / "a" / "b" / "out.txt"
    atomic_write(target, "one")
    atomic_write(target, b"two")
    assert target.read_text() == "two"
    atomic_write_json(tmp_path / "x.json", {"k": [1, 2]})
    assert (tmp_path / "x.json").read_text().startswith("{")
    assert sorted(p.name for p in target.parent.iterdir()) == ["out.txt"]


def test_atomic_write_failure_keeps_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_open(target) as fh:
            fh.write("half")
            raise RuntimeError("interrupted")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_every_cache_lives_under_simpatterns_cache(tmp_path, monkeypatch):
    from simpatterns.agents.menu import MenuStore
    from simpatterns.agents.phyre_compat.simulation_cache import get_cache_folder

    monkeypatch.delenv("PHYRE_CACHE_DIR", raising=False)
    monkeypatch.setenv("SIMPATTERNS_CACHE", str(tmp_path / "mine"))
    assert MenuStore().dir == tmp_path / "mine" / "menus"
    assert get_cache_folder(10) == tmp_path / "mine" / "phyre" / "offline_simulation" / "10"
    monkeypatch.setenv("PHYRE_CACHE_DIR", str(tmp_path / "phyre"))  # PHYRE's own variable moves its cache alone
    assert get_cache_folder(10) == tmp_path / "phyre" / "offline_simulation" / "10"
    monkeypatch.delenv("SIMPATTERNS_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir("menus") == tmp_path / "xdg" / "simpatterns" / "menus"


def test_atomic_write_errors_name_the_users_path(tmp_path):
    (tmp_path / "dir").mkdir()
    with pytest.raises(WriteError, match=r"dir: is a directory"):
        atomic_write(tmp_path / "dir", "x")
    (tmp_path / "file").write_text("")
    with pytest.raises(WriteError) as info:
        atomic_write(tmp_path / "file" / "below.txt", "x")
    assert str(tmp_path / "file" / "below.txt") in str(info.value) and ".tmp" not in str(info.value)


def _square(x: int) -> int:
    return x * x


def _offset(state: dict, x: int) -> tuple[int, int]:
    state["calls"] += 1
    return x + state["offset"], os.getpid()


def _build(offset: int) -> dict:
    return {"offset": offset, "calls": 0}


def _fail_on_seven(x: int) -> int:
    if x == 7:
        raise ValueError("seven")
    return x


@pytest.mark.parametrize("workers", [1, 2])
def test_results_do_not_depend_on_workers(workers):
    with make_executor(workers) as ex:
        assert ex.map(_square, range(50)) == [x * x for x in range(50)]
        pairs = sorted(ex.imap(_square, range(10), chunksize=3))
        assert pairs == [(i, i * i) for i in range(10)]


@pytest.mark.parametrize("n, workers", [(1, 2), (7, 2), (200, 2), (5000, 8), (64, 1)])
def test_chunks_cover_every_item_in_order(n, workers):
    indexed = list(enumerate(range(n)))
    chunks = split_chunks(indexed, workers)
    assert [item for chunk in chunks for item in chunk] == indexed
    sizes = [len(c) for c in chunks]
    assert all(1 <= k <= 64 for k in sizes) and len(set(sizes[:-1])) <= 1  # even, the last one shorter
    assert len(chunks) <= max(8 * workers, -(-n // 64)) and (n < 8 * workers or len(chunks) >= 4 * workers)
    assert [len(c) for c in split_chunks(indexed, workers, chunksize=3)] == [3] * (n // 3) + ([n % 3] if n % 3 else [])


def test_setup_is_built_once_per_worker_and_passed_first():
    setup = WorkerSetup(_build, (100,))
    inline = InlineExecutor(setup).map(_offset, range(5))
    assert [r for r, _ in inline] == [100, 101, 102, 103, 104]
    with ProcessExecutor(2, setup) as ex:
        out = ex.map(_offset, range(40), chunksize=2)
    assert [r for r, _ in out] == [100 + i for i in range(40)]
    assert len({pid for _, pid in out}) <= 2


def _frozen(_: int) -> int:
    import gc

    return gc.get_freeze_count()


def test_forked_workers_leave_the_parents_objects_alone_and_the_parent_unfrozen(monkeypatch):
    # the parent's objects are frozen while the workers fork (a worker's garbage collection
    # would otherwise copy every page holding them), then given back to the parent's collector
    import gc

    import simpatterns.parallel as parallel

    # fork even if the test runner has started threads (safe for a function this small)
    monkeypatch.setattr(parallel, "start_method", lambda: "fork")
    held = [{"k": i} for i in range(20000)]  # objects a worker must not touch
    with ProcessExecutor(2, start=True) as ex:
        assert gc.get_freeze_count() == 0
        in_workers = ex.map(_frozen, range(4), chunksize=1)
    assert min(in_workers) >= len(held)
    assert gc.get_freeze_count() == 0
    # a caller that froze its own objects keeps them frozen
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with ProcessExecutor(2, start=True) as ex:
            ex.map(_frozen, range(2))
        assert gc.get_freeze_count() > frozen // 2  # still frozen (a few may have been freed since)
    finally:
        gc.unfreeze()


def test_a_failing_item_raises_in_the_caller():
    with pytest.raises(ValueError, match="seven"):
        list(parallel_map(_fail_on_seven, list(range(20)), workers=2, chunksize=1))


SCRIPT = textwrap.dedent("""
    import sys, time
    from simpatterns.parallel import parallel_map

    def slow(x):
        time.sleep(0.05 if x < 4 else 30)
        return x

    # no __main__ guard on purpose: a plain script must work
    got = []
    try:
        for i, r in parallel_map(slow, list(range(12)), workers=2, chunksize=1):
            got.append(r)
            print("done", r, flush=True)
    except KeyboardInterrupt:
        print("interrupted with", sorted(got), flush=True)
        sys.exit(130)
""")


def test_ctrl_c_stops_promptly_and_keeps_finished_results(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    lines = []
    assert proc.stdout is not None
    while len(lines) < 4:
        lines.append(proc.stdout.readline().strip())
    t0 = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)  # the terminal signals the whole foreground group
    out, err = proc.communicate(timeout=10)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 130, err
    assert elapsed < 20.0  # the unfinished items sleep 30 s: well before them, whatever the load
    assert "interrupted with [0, 1, 2, 3]" in out
    assert "Traceback" not in err


def _write_slowly(path: str) -> str:
    from simpatterns.files import atomic_open

    with atomic_open(path) as fh:
        fh.write("partial")
        time.sleep(30)  # interrupted here, mid-write
    return path


def test_stopping_workers_mid_write_leaves_no_temporary_file(tmp_path):
    def stop_at_first(pairs):
        for _ in pairs:
            raise KeyboardInterrupt

    quick = str(tmp_path / "quick.txt")
    with pytest.raises(KeyboardInterrupt):
        with ProcessExecutor(2) as ex:
            items = [str(tmp_path / f"slow{i}.txt") for i in range(3)]
            stop_at_first(ex.imap(_square_or_write, [quick] + items, chunksize=1))
    time.sleep(0.2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["quick.txt"]


def _square_or_write(path: str) -> str:
    if path.endswith("quick.txt"):
        Path(path).write_text("done")
        return path
    return _write_slowly(path)


def test_a_temporary_left_open_by_an_interrupt_is_removed_at_exit_but_never_by_a_child(tmp_path):
    """Ctrl-C can land between creating a temporary and entering its cleanup: the process
    removes the temporaries it still has open when it exits; a forked child never removes its
    parent's."""
    import os

    from simpatterns import files

    cm = files.atomic_open(tmp_path / "out.txt")
    fh = cm.__enter__()
    fh.write("partial")
    [tmp] = [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    pid = os.fork()
    if pid == 0:  # the child exits through the same clean-up
        files._remove_open_temporaries()
        os._exit(0 if tmp.exists() else 1)
    assert os.waitpid(pid, 0)[1] == 0
    files._remove_open_temporaries()
    assert not tmp.exists() and not (tmp_path / "out.txt").exists()
    fh.close()


def test_ctrl_c_is_held_back_inside_pool_calls_and_acted_on_after():
    # a KeyboardInterrupt raised inside concurrent.futures can leave a future's lock held and
    # the process unable to exit; pool calls hold it back and raise it when they return
    from simpatterns.parallel import _shielded

    steps = []
    with pytest.raises(KeyboardInterrupt):
        with _shielded():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # the signal arrives here, and is only recorded
            steps.append("inside")
        steps.append("after")
    assert steps == ["inside"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is given back
    with _shielded():  # without a signal nothing happens
        with _shielded():  # nested: the outer block holds it
            steps.append("nested")
    assert steps == ["inside", "nested"]
