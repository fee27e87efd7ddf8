"""One self-contained HTML page per trace, and an index page for a dataset folder.

Everything is inlined (data as JSON, the script and the style), so the page
opens offline from disk: no server, no network, no CDN.
"""

from __future__ import annotations

import html
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from simpatterns.files import atomic_write
from simpatterns.trace import Trace
from simpatterns.viewer.data import episode_data, event_data, program_data, scene_data

if TYPE_CHECKING:
    from simpatterns.annotation import Annotation
    from simpatterns.dsl import RewardProgram

MAX_DRAW_FRAMES = 1000  # drawn frames per page; events are never decimated


def _asset(name: str) -> str:
    return resources.files("simpatterns.viewer").joinpath(name).read_text(encoding="utf-8")


def _plain(x: Any) -> Any:
    """``x`` as strict JSON values: numpy scalars and arrays as Python ones, non-finite numbers
    (a detector's NaN param) as None, which the browser's JSON.parse accepts."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return _plain(x.tolist())
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x if x is None or isinstance(x, (str, int, float, bool)) else str(x)


def _json_script(data: Any) -> str:
    # "</" would end the script element early
    return json.dumps(_plain(data), separators=(",", ":"), allow_nan=False).replace("</", "<\\/")


@dataclass
class TracePage:
    """What one trace's page shows. ``qa`` and ``agent`` are the records of `simpatterns.viewer.runs`."""

    trace: Trace
    title: str
    annotation: Annotation | None = None
    program: RewardProgram | None = None
    qa: list[dict[str, Any]] = field(default_factory=list)
    agent: list[dict[str, Any]] = field(default_factory=list)
    max_frames: int = MAX_DRAW_FRAMES
    back: str | None = None  # link to the index page
    notes: list[str] = field(default_factory=list)  # shown under the title

    def data(self) -> dict[str, Any]:
        t = self.trace
        d: dict[str, Any] = {
            "title": self.title, "num_frames": t.num_frames, "dt": t.dt, "episode": episode_data(t),
            "meta": {k: t.meta.get(k) for k in ("simulator", "template", "variant", "action", "success", "goal")
                     if t.meta.get(k) is not None},
            "scene": scene_data(t, self.max_frames),
            "events": event_data(self.annotation, t.names) if self.annotation is not None else [],
            "patterns": list(self.annotation.pattern_events) if self.annotation is not None else [],
            "cut_frames": sorted({q["cut_frame"] for q in self.qa if q.get("cut_frame") is not None}),
        }
        if self.program is not None:
            d["program"] = program_data(self.program, t, self.annotation)
        return d

    def html(self) -> str:
        d = self.data()
        return _PAGE.format(title=html.escape(self.title), css=_asset("viewer.css"), js=_asset("viewer.js"),
                            data=_json_script(d), header=_header(d, self.back, self.notes),
                            panels=_panels(d, self.qa, self.agent))

    def write(self, path: str | os.PathLike) -> Path:
        return atomic_write(Path(path), self.html())


def _header(d: dict[str, Any], back: str | None, notes: Sequence[str] = ()) -> str:
    m = d["meta"]
    bits = [f"{k} {html.escape(str(m[k]))}" for k in ("simulator", "template", "variant") if k in m]
    if "success" in m:
        bits.append('<span class="ok">solved</span>' if m["success"] else '<span class="no">not solved</span>')
    ep = d["episode"]
    bits.append(f"{d['num_frames']} frames of a {ep['horizon']}-frame horizon, dt {d['dt']:.4g} s")
    link = f'<a href="{html.escape(back)}">index</a> · ' if back else ""
    return link + " · ".join(bits) + "".join(f'<br><span class="no">{html.escape(n)}</span>' for n in notes)


def _frame_link(f: int, dt: float) -> str:
    return f'<a class="frame" data-frame="{int(f)}">frame {int(f)} ({f * dt:.2f} s)</a>'


def _panels(d: dict[str, Any], qa: Sequence[dict[str, Any]], agent: Sequence[dict[str, Any]]) -> str:
    out = []
    p = d.get("program")
    if p:
        rows = "".join(
            f'<tr><td>c{k + 1}</td><td><code>{html.escape(c["text"])}</code></td>'
            f'<td class="{"ok" if c["success"] else "no"}">{"yes" if c["success"] else "no"}</td>'
            f'<td>{c["score"]:.3f}</td><td>{_frame_link(c["decided"], d["dt"])}</td>'
            f'<td>{html.escape(c["detail"])}</td></tr>' for k, c in enumerate(p["clauses"]))
        out.append(
            f'<section id="program"><h2>Reward program: <span class="{"ok" if p["success"] else "no"}">'
            f'{"SUCCESS" if p["success"] else "FAIL"}</span>, score {p["score"]:.3f}</h2>'
            f'<table><tr><th>clause</th><th>text</th><th>success</th><th>score</th><th>decided at</th>'
            f'<th>why</th></tr>{rows}</table>'
            '<p>Over time, on the rollout cut at each frame (its last frame held after the cut): program score '
            '(black), success (green, dashed), clause scores (colours), the frame deciding each clause '
            '(dotted).</p>'
            '<svg id="program-plot" width="600" height="140"></svg>'
            f'<details><summary>reward eval --explain</summary><pre>{html.escape(p["explain"])}</pre></details></section>')
    if qa:
        items = []
        for q in qa:
            verdict = "" if q.get("correct") is None else (
                '<span class="ok">correct</span>' if q["correct"] else '<span class="no">wrong</span>')
            shown = "".join(f"<p><b>{html.escape(str(m['role']))}</b></p><pre>{html.escape(m['content'])}</pre>"
                            + "".join(f'<img class="shown" src="{html.escape(u)}" alt="an image the model was shown">'
                                      for u in m.get("images", []))
                            for m in q["shown"]) or "<p>(no transcript in the run)</p>"
            w = q.get("window") or []
            seen = (f"; it sees {w[0]:.2f}-{w[1]:.2f} s: {_frame_link(round(w[0] / d['dt']), d['dt'])} to "
                    f"{_frame_link(min(round(w[1] / d['dt']), d['num_frames'] - 1), d['dt'])}") if len(w) == 2 else ""
            cut = f"; cut at {_frame_link(q['cut_frame'], d['dt'])}" if q.get("cut_frame") is not None else ""
            items.append(
                f'<div class="qa"><p><b>{html.escape(q["id"])}</b> [{html.escape(str(q["condition"]))}] '
                f'{verdict}{cut}{seen}</p><p>{html.escape(q["question"])}</p>'
                f'<p>answer: <code>{html.escape(json.dumps(q["parsed"]))}</code> · gold: '
                f'<code>{html.escape(json.dumps(q["gold"]))}</code></p>'
                f'<details><summary>what the model was shown</summary>{shown}</details>'
                f'<details><summary>its raw answer</summary><pre>{html.escape(str(q["response"]))}</pre></details></div>')
        out.append(f'<section id="qa"><h2>Questions ({len(qa)})</h2>{"".join(items)}</section>')
    if agent:
        items = []
        for e in agent:
            rows = "".join(f'<tr><td>{a.get("n")}</td><td>{html.escape(str(a.get("status")))}</td>'
                           f'<td>{html.escape(json.dumps(a.get("action") or a.get("choice")))}</td>'
                           f'<td>{html.escape(str(a.get("reason", "")))}</td></tr>' for a in e["attempts"])
            items.append(f'<p><b>{html.escape(str(e["condition"]))}</b> seed {e["seed"]}'
                         f'{" · " + html.escape(e["stopped"]) if e["stopped"] else ""}</p>'
                         f'<table><tr><th>#</th><th>status</th><th>action</th><th>reason</th></tr>{rows}</table>')
        out.append(f'<section id="agent"><h2>Agent attempts on task {html.escape(agent[0]["task"])}</h2>'
                   f'{"".join(items)}</section>')
    return "".join(out)


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title><style>{css}</style></head>
<body><h1>{title}</h1><p>{header}</p>
<div class="row"><div>
<canvas id="scene" width="512" height="512"></canvas>
<div class="controls"><button id="play">play</button>
<label>speed <select id="speed"><option value="0.25">0.25x</option><option value="0.5">0.5x</option>
<option value="1" selected>1x</option><option value="2">2x</option><option value="4">4x</option></select></label>
<select id="view"><option value="side">side (x, z)</option><option value="front">front (y, z)</option>
<option value="top">top (x, y)</option></select></div>
<input id="scrub" type="range" min="0" value="0" step="1"><div id="time"></div>
</div><div id="panels">{panels}</div></div>
<section><h2>Events</h2><label>pattern <select id="pattern"><option value="">all</option></select></label>
<label>body <select id="body"><option value="">all</option></select></label>
<div id="timeline"></div></section>
<div id="tip"></div>
<script id="data" type="application/json">{data}</script>
<script>{js}</script>
</body></html>
"""


# ------------------------------------------------------------------ index page
@dataclass
class IndexRow:
    page: str  # relative link
    file: str
    template: Any
    variant: Any
    kind: str
    success: Any
    frames: int
    events: int
    counts: dict[str, int]


def index_html(title: str, rows: Sequence[IndexRow]) -> str:
    data = [r.__dict__ for r in rows]
    return _INDEX.format(title=html.escape(title), css=_asset("viewer.css"), data=_json_script(data),
                         js=_asset("index.js"))


_INDEX = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title><style>{css}</style></head>
<body><h1>{title}</h1>
<p><label>filter <input id="filter" placeholder="template, kind, pattern..."></label>
<label>success <select id="success"><option value="">any</option><option value="true">solved</option>
<option value="false">not solved</option></select></label> <span id="count"></span></p>
<table id="index"><thead><tr><th data-key="file">trace</th><th data-key="template">template</th>
<th data-key="variant">variant</th><th data-key="kind">kind</th><th data-key="success">success</th>
<th data-key="frames">frames</th><th data-key="events">events</th><th>most frequent patterns</th></tr></thead>
<tbody></tbody></table>
<script id="data" type="application/json">{data}</script>
<script>{js}</script>
</body></html>
"""
