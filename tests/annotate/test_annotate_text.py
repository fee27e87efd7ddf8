from __future__ import annotations

import numpy as np

from simpatterns.annotation import Annotation, PatternEvent
from simpatterns.annotate.annotator import annotate
from simpatterns.annotate.text import annotation_text, scene_header, timeline_text
from simpatterns.simulators.phyre import get_template, simulate


def test_scene_header_names_bodies_action_and_positions():
    t = get_template("00000")
    scene = t.scene(next(t.valid_param_sets()))
    trace = simulate(scene, (0.3, 0.9, 0.2), max_steps=60).trace
    text = scene_header(trace)
    assert "template 00000" in text and "Goal: make the green ball touch the blue ball" in text
    # action: x, y = 0.3, 0.9 of 255 px; radius 2 + 30 * 0.2 = 8 px
    assert "red ball of radius 8.0 placed at (76.5, 229.5)" in text
    for i, body in enumerate(trace.bodies):
        if body.role != "wall":
            x, y = trace.position[0, i]
            assert f"- {body.name}: " in text and f"at ({x:.1f}, {y:.1f})" in text
    assert "walls (static, scene border): ground, left wall, top wall, right wall" in text
    assert "1.00 s recorded (61 frames at 60 per second)" in text


def _annotation(events: list[tuple[str, int, dict]], T: int = 600, patterns=None) -> Annotation:
    pats = patterns or sorted({e[0] for e in events})
    return Annotation.from_events([PatternEvent(p, f, q) for p, f, q in events], num_frames=T, patterns=pats, dt=1 / 60)


def test_per_frame_activations_merge_into_intervals(drop_trace):
    pair = {"object_a": "red ball", "object_b": "ground"}
    events = [("touching", f, pair) for f in range(72, 208)]  # 1.20 s .. 3.45 s at 60 fps
    events += [("touching", f, pair) for f in (300, 301)]
    events += [("moving", f, {"object": "red ball", "speed": float(f)}) for f in range(10, 13)]
    events += [("bounce", 150, {"object": "red ball", "height": 2.5})]
    text = timeline_text(drop_trace, _annotation(events, patterns=["moving", "touching", "bounce", "slide"]))
    lines = text.splitlines()
    assert any(ln.split() == ["1.20–3.45", "touching:", "red", "ball,", "ground"] for ln in lines)
    assert any(ln.split() == ["5.00–5.02", "touching:", "red", "ball,", "ground"] for ln in lines)
    assert any(ln.split() == ["0.17–0.20", "moving:", "red", "ball,", "speed", "10–12"] for ln in lines)
    assert any(ln.split() == ["2.50", "bounce:", "red", "ball,", "height", "2.5"] for ln in lines)
    # time order
    starts = [float(ln.split()[0].split("–")[0]) for ln in lines[1:] if ln[:1].isdigit()]
    assert starts == sorted(starts)
    assert "Not observed: slide" in text


def test_budget_summarises_the_most_frequent_pattern(drop_trace):
    events = [("grid cell transition", f, {"object": "red ball"}) for f in range(0, 600, 3)]
    events += [("grid cell transition", f, {"object": "black box"}) for f in range(1, 300, 6)]
    events += [("bounce", 100, {"object": "red ball"}), ("bounce", 400, {"object": "black box"})]
    ann = _annotation(events)
    full = timeline_text(drop_trace, ann, budget_chars=100_000)
    assert len(full) > 2000
    short = timeline_text(drop_trace, ann, budget_chars=800)
    assert len(short) <= 800
    # the rare pattern keeps its lines; the frequent one becomes a single summary line
    assert any(ln.split() == ["1.67", "bounce:", "red", "ball"] for ln in short.splitlines())
    assert any(ln.split() == ["6.67", "bounce:", "black", "box"] for ln in short.splitlines())
    summary = [ln for ln in short.splitlines() if ln.startswith("- grid cell transition")]
    assert len(summary) == 1
    assert "250 times between 0.00 and 9.95 s" in summary[0] and "red ball x200" in summary[0] and "black box x50" in summary[0]
    tiny = timeline_text(drop_trace, ann, budget_chars=200)
    assert len(tiny) <= 200 and tiny.startswith("Timeline")


def test_summary_lists_tied_objects_by_name(drop_trace):
    # the same counts in any order of events: the summary line may not depend on set or hash order
    others = [n for n in drop_trace.names if n != "red ball"]
    # the bodies first touch in reverse name order (first appearance must not decide a tie either)
    events = [("touching", f + k, {"object_a": "red ball", "object_b": b})
              for f in range(0, 580, 20) for k, b in enumerate(sorted(others, reverse=True))]
    n = len(range(0, 580, 20))
    ties = ", ".join(f"{b} x{n}" for b in sorted(others)[:5])
    for order in (events, events[::-1]):
        short = timeline_text(drop_trace, _annotation(order), budget_chars=300)
        [summary] = [ln for ln in short.splitlines() if ln.startswith("- touching")]
        assert summary.endswith(f"red ball x{n * len(others)}, {ties}" + (", +1 more" if len(others) > 5 else ""))


def test_until_cuts_the_timeline(drop_trace):
    events = [("bounce", 60, {"object": "red ball"}), ("bounce", 240, {"object": "red ball"})]
    text = timeline_text(drop_trace, _annotation(events), until_s=2.0)
    assert "1.00" in text and "4.00" not in text and "up to 2.00 s" in text


def test_real_annotation_text_is_deterministic_and_mentions_errors(drop_trace, small_library, sources):
    lib = small_library.copy()
    lib.add(sources["late"], provenance="hand-written")
    a = annotate(drop_trace, lib)
    text = annotation_text(drop_trace, a, budget_chars=3000)
    assert text == annotation_text(drop_trace, annotate(drop_trace, lib), budget_chars=3000)
    assert text.startswith("Scene: ") and "Timeline" in text and len(text) <= 3000
    assert "Detector errors (no data): late" in text
    assert "touching: ground, black box" not in text or "red ball" in text


def test_frames_param_is_an_interval_and_is_cut_by_until(drop_trace):
    events = [("airborne", 60, {"object": "red ball", "frames": 30}), ("bounce", 100, {"object": "red ball"})]
    full = timeline_text(drop_trace, _annotation(events))
    assert any(ln.split() == ["1.00–1.48", "airborne:", "red", "ball"] for ln in full.splitlines())
    cut = timeline_text(drop_trace, _annotation(events), until_s=1.2)
    assert any(ln.split() == ["1.00–1.20", "airborne:", "red", "ball"] for ln in cut.splitlines())
    assert "1.48" not in cut and "bounce" not in cut.split("\n", 1)[1].split("Not observed")[0]


def test_lines_kept_over_a_growing_trace_equal_lines_made_afresh():
    """`TimelineLines` on an annotation that grows step by step, as an episode's does: intervals
    cut at the trace's end (their lines end where the trace does until they close), intervals
    starting on the last frame (grouped as an instant until the trace grows), instants joining
    earlier groups, events rewritten (an open interval whose length changes) and a fresh episode
    in the same object. Each call's lines equal `_merged_lines` on the same annotation."""
    from simpatterns.annotate.text import TimelineLines, _merged_lines

    rng = np.random.default_rng(7)
    names = {"bead 1", "bead 2", "bead 3"}
    kept = TimelineLines()
    compared = cut_seen = last_frame_interval = 0
    for episode in range(12):
        drag: list[tuple[int, dict]] = []
        touch: list[tuple[int, dict]] = []
        T = 1
        for step in range(30):
            T += int(rng.integers(1, 9))
            for f in sorted(rng.choice(np.arange(T - 8 if T > 8 else 0, T), size=int(rng.integers(0, 3)),
                                       replace=False).tolist()):
                if drag and f <= drag[-1][0]:
                    continue  # a detector reports in frame order
                bead = f"bead {int(rng.integers(1, 4))}"
                drag.append((f, {"object": bead, "frames": int(rng.integers(1, 12)), "distance": float(f % 5)}))
                touch.append((f, {"object_a": bead, "object_b": "bead 3"}))
            if drag and rng.random() < 0.2:  # the last interval is still growing: the detector rewrites it
                f, q = drag[-1]
                drag[-1] = (f, {**q, "frames": q["frames"] + 1})
            ann = Annotation({"bead dragged": list(drag), "contact start": list(touch)}, T,
                             ["bead dragged", "contact start", "crossing formed"])
            got = kept.lines(ann, names)
            assert got == _merged_lines(ann, names, None), (episode, step, T)
            compared += 1
            cut_seen += any(f + q["frames"] > T for f, q in drag)
            last_frame_interval += any(f == T - 1 and q["frames"] > 1 for f, q in drag)
    assert compared == 360 and cut_seen > 30 and last_frame_interval > 3  # the cases the kept lines must redo
