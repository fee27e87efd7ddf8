"""The viewer page in a real headless Chromium: loads cleanly, plays, jumps to clicked events,
draws the trace's positions, and looks like the project's own PNG render."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import numpy as np
from PIL import Image

from simpatterns.simulators.phyre.render import PALETTE, render_frame
from simpatterns.trace import Trace
from simpatterns.viewer import trace_page

WAIT_S = 120.0  # a generous deadline for the page to react on a loaded machine, not a speed target


def _page(t19: Path, tmp_path: Path, **kw) -> Path:
    return trace_page(t19, **kw).write(tmp_path / "view.html")


def _wait(browser, expression: str) -> object:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        value = browser.eval(expression)
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"never true: {expression}")


def _centre(browser, selector: str) -> tuple[float, float]:
    x, y, w, h = browser.eval(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); "
                              "e.scrollIntoView({block: 'center', inline: 'center'}); "
                              "const r = e.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; })()")
    return x + w / 2, y + h / 2


def test_page_loads_without_console_errors_and_play_advances_the_frame(browser, t19, tmp_path):
    browser.open(_page(t19, tmp_path))
    assert browser.errors == []
    assert browser.eval("viewer.state.frame") == 0
    browser.click(*_centre(browser, "#play"))
    assert _wait(browser, "viewer.state.frame > 0")
    assert browser.eval("+document.getElementById('scrub').value === viewer.state.frame")  # one read: it plays on
    browser.click(*_centre(browser, "#play"))  # pause: the frame stays
    assert _wait(browser, "!viewer.state.playing")
    paused = browser.eval("viewer.state.frame")
    time.sleep(0.3)
    assert browser.eval("viewer.state.frame") == paused
    assert browser.errors == []


def test_clicking_an_event_moves_the_scrubber_to_its_frame(browser, t19, tmp_path):
    browser.open(_page(t19, tmp_path))
    events = browser.eval("[...document.querySelectorAll('.ev.tick')].map(e => +e.dataset.frame)")
    assert len(events) > 5
    target = max(events)  # the latest tick: far from frame 0
    x, y = _centre(browser, f".ev.tick[data-frame='{target}']")
    hit = browser.eval(f"+document.elementFromPoint({x}, {y}).dataset.frame")  # the event on top there
    assert hit > 0
    browser.click(x, y)
    assert browser.eval("viewer.state.frame") == hit
    assert browser.eval("+document.getElementById('scrub').value") == hit
    assert f"frame {hit} " in browser.eval("document.getElementById('time').textContent")


def test_drawn_positions_equal_the_trace(browser, t19, tmp_path):
    trace = Trace.load(t19)
    browser.open(_page(t19, tmp_path, max_frames=300))  # decimated: the page draws every 4th frame
    drawn_frames = browser.eval("viewer.data.scene.frames")
    assert drawn_frames[-1] == trace.num_frames - 1 and len(drawn_frames) <= 300
    for f in (0, drawn_frames[57], drawn_frames[-1]):
        browser.eval(f"viewer.setFrame({f})")
        drawn = browser.eval("viewer.drawn()")
        assert drawn["frame"] == f
        np.testing.assert_allclose(drawn["position"], trace.position[f], atol=0.006)
        np.testing.assert_allclose(drawn["angle"], trace.angle[f], atol=6e-5)
    # between two drawn frames the page shows the earlier one; events keep their own frames
    browser.eval(f"viewer.setFrame({drawn_frames[10] + 1})")
    assert browser.eval("viewer.drawn().frame") == drawn_frames[10]
    ann_frames = {e["frame"] for e in browser.eval("viewer.data.events")}
    assert ann_frames - set(drawn_frames), "events sit on frames the page does not draw"


def _centroids(img: np.ndarray, tolerance: float) -> dict[str, tuple[float, float]]:
    out = {}
    for name, rgb in PALETTE.items():
        if name == "white":
            continue
        mask = np.abs(img[..., :3].astype(int) - np.array(rgb)).max(axis=-1) <= tolerance
        if mask.sum() >= 20:
            ys, xs = np.nonzero(mask)
            out[name] = (float(xs.mean()), float(ys.mean()))
    return out


def test_screenshot_at_frame_0_matches_the_png_render(browser, t19, tmp_path):
    trace = Trace.load(t19)
    browser.open(_page(t19, tmp_path))
    x, y, w, h = browser.eval("viewer.canvasRect()")
    shot = np.asarray(Image.open(io.BytesIO(browser.screenshot((x, y, w, h)))).convert("RGB"))
    png = np.asarray(render_frame(trace, 0, size=int(w)))
    assert shot.shape == png.shape
    seen, expected = _centroids(shot, 12), _centroids(png, 0)
    assert set(expected) >= {"red", "green", "purple", "gray", "black"}
    assert set(seen) == set(expected)
    for colour, (ex, ey) in expected.items():
        sx, sy = seen[colour]
        assert abs(sx - ex) <= 2 and abs(sy - ey) <= 2, (colour, (sx, sy), (ex, ey))


def test_program_panel_shows_clauses_and_their_deciding_frames(browser, t19, tmp_path):
    goal = tmp_path / "goal.rwd"
    goal.write_text('AND(\n    TOUCHING("green ball", "purple pad", hold=0.05),\n'
                    '    NEVER(TOUCHING("red ball", "purple pad")),\n)\n')
    browser.open(_page(t19, tmp_path, program=goal))
    assert browser.errors == []
    rows = browser.eval("[...document.querySelectorAll('#program tr')].slice(1).map(r => r.innerText)")
    assert len(rows) == 2 and "TOUCHING" in rows[0] and "NEVER" in rows[1]
    assert browser.eval("document.querySelectorAll('#program-plot polyline').length") == 4  # 2 clauses, score, success
    link = browser.eval("document.querySelector('#program a.frame').dataset.frame")
    browser.click(*_centre(browser, "#program a.frame"))
    assert browser.eval("viewer.state.frame") == int(link)


def test_dataset_index_sorts_and_filters(browser, tmp_path):
    from typer.testing import CliRunner

    from simpatterns.cli import app

    runner = CliRunner()
    data = tmp_path / "data"
    assert runner.invoke(app, ["dataset", "--templates", "0,19", "--variants", "2", "--actions", "solution,random:1",
                               "-o", str(data), "-q"]).exit_code == 0
    index = tmp_path / "index.html"
    assert runner.invoke(app, ["view", str(data), "-o", str(index)]).exit_code == 0
    browser.open(index)
    assert browser.errors == []
    assert browser.eval("document.querySelectorAll('#index tbody tr').length") == 8
    browser.click(*_centre(browser, "th[data-key='events']"))
    events = browser.eval("[...document.querySelectorAll('#index tbody tr')].map(r => +r.cells[6].textContent)")
    assert events == sorted(events)
    browser.click(*_centre(browser, "th[data-key='events']"))  # again: descending
    assert browser.eval("[...document.querySelectorAll('#index tbody tr')].map(r => +r.cells[6].textContent)") == \
        sorted(events, reverse=True)
    browser.eval("(() => { const f = document.getElementById('filter'); f.value = 'solution 00019'; "
                 "f.dispatchEvent(new Event('input')); })()")
    shown = browser.eval("[...document.querySelectorAll('#index tbody tr')].map(r => r.cells[0].textContent)")
    assert len(shown) == 2 and all(s.startswith("T00019") and "solution" in s for s in shown)
    browser.click(*_centre(browser, "#index tbody a"))  # the link opens the trace's page
    assert _wait(browser, "typeof viewer !== 'undefined' && viewer.data.title.startsWith('T00019')")
    assert browser.errors == []


def test_a_mujoco_trace_is_drawn_in_three_views(browser, tmp_path):
    from simpatterns import examples
    from simpatterns.simulators.mujoco.tracer import simulate

    trace = simulate(str(Path(str(examples.path())) / "mujoco" / "table_drop.xml"), 300, stride=3)
    path = trace.save(tmp_path / "drop.npz")
    browser.open(_page(path, tmp_path))
    assert browser.errors == []
    f = browser.eval("viewer.data.scene.frames")[40]
    browser.eval(f"viewer.setFrame({f})")
    np.testing.assert_allclose(browser.eval("viewer.drawn().position"), trace.position[f], atol=6e-5)
    shots = []
    for view in ("side", "front", "top"):
        browser.eval(f"(() => {{ const v = document.getElementById('view'); v.value = '{view}'; "
                     "v.dispatchEvent(new Event('change')); })()")
        x, y, w, h = browser.eval("viewer.canvasRect()")
        shots.append(np.asarray(Image.open(io.BytesIO(browser.screenshot((x, y, w, h)))).convert("RGB")))
    assert browser.errors == []
    for shot in shots:  # every body colour of the scene is on the picture
        assert (np.abs(shot.astype(int) - [0xF3, 0x4F, 0x46]).max(axis=-1) < 12).sum() > 20  # the red ball
    assert not np.array_equal(shots[0], shots[2])


def test_timeline_rows_filter_by_pattern_and_body_and_hover_shows_params(browser, t19, tmp_path):
    browser.open(_page(t19, tmp_path))
    labels = browser.eval("[...document.querySelectorAll('.tl-label')].map(l => l.textContent)")
    assert "airborne  ·  red ball" in labels and "airborne  ·  green ball" in labels  # one row per body
    browser.eval("(() => { const s = document.getElementById('body'); s.value = 'green ball'; "
                 "s.dispatchEvent(new Event('change')); })()")
    shown = browser.eval("[...document.querySelectorAll('.tl-row')].filter(r => r.style.display !== 'none')"
                         ".map(r => JSON.parse(r.dataset.bodies))")
    assert shown and all("green ball" in b for b in shown)
    browser.eval("(() => { const s = document.getElementById('pattern'); s.value = 'airborne'; "
                 "s.dispatchEvent(new Event('change')); })()")
    shown = browser.eval("[...document.querySelectorAll('.tl-row')].filter(r => r.style.display !== 'none')"
                         ".map(r => r.firstChild.textContent)")
    assert shown == ["airborne  ·  green ball"]
    x, y = _centre(browser, ".tl-row[data-pattern='airborne'][data-bodies='[\"green ball\"]'] .ev")
    browser.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
    tip = browser.eval("document.getElementById('tip').textContent")
    assert tip.startswith("airborne  frame ") and '"object": "green ball"' in tip and '"frames":' in tip


def _key(browser, key: str, code: int, modifiers: int = 0) -> None:
    for kind in ("rawKeyDown", "keyUp"):
        browser.send("Input.dispatchKeyEvent", type=kind, key=key, code=key, windowsVirtualKeyCode=code,
                     modifiers=modifiers)


def test_keys_step_through_the_drawn_frames_and_play(browser, t19, tmp_path):
    browser.open(_page(t19, tmp_path, max_frames=200))
    frames = browser.eval("viewer.data.scene.frames")
    _key(browser, "ArrowRight", 39)
    assert browser.eval("viewer.state.frame") == frames[1]
    _key(browser, "ArrowRight", 39, modifiers=8)  # shift: ten drawn frames
    assert browser.eval("viewer.state.frame") == frames[11]
    _key(browser, "ArrowLeft", 37)
    assert browser.eval("viewer.state.frame") == frames[10]
    browser.send("Input.dispatchKeyEvent", type="keyDown", key=" ", code="Space", text=" ", windowsVirtualKeyCode=32)
    browser.send("Input.dispatchKeyEvent", type="keyUp", key=" ", code="Space", windowsVirtualKeyCode=32)
    assert browser.eval("viewer.state.playing")
    assert _wait(browser, f"viewer.state.frame > {frames[10]}")
    assert browser.errors == []
