from __future__ import annotations

import json

from PIL import Image
from typer.testing import CliRunner

from simpatterns.annotation import Annotation, PatternEvent
from simpatterns.annotate.annotator import annotate
from simpatterns.annotate.plots import captioned_gif, frame_captions, timeline_plot, timeline_rows


def test_timeline_plot_writes_a_png(tmp_path, drop_trace, small_library, sources):
    lib = small_library.copy()
    lib.add(sources["late"], provenance="hand-written")
    ann = annotate(drop_trace, lib)
    out = timeline_plot(ann, tmp_path / "t.png", trace=drop_trace)
    with Image.open(out) as img:
        assert img.format == "PNG"
        w, h = img.size
    # one row per pattern: a library with more patterns gives a taller figure
    more = Annotation.from_events(ann.events, num_frames=ann.num_frames, patterns=ann.patterns + [f"p{k}" for k in range(8)])
    with Image.open(timeline_plot(more, tmp_path / "more.png")) as img:
        assert img.size[0] == w and img.size[1] > h
    assert sorted(p.name for p in tmp_path.iterdir()) == ["more.png", "t.png"]


def test_gif_size_option(tmp_path):
    from simpatterns.cli import app

    runner = CliRunner()
    res = runner.invoke(app, ["simulate", "-t", "0", "-o", str(tmp_path / "t.npz"), "--gif", str(tmp_path / "s.gif"),
                              "--gif-size", "128"])
    assert res.exit_code == 0, res.output
    with Image.open(tmp_path / "s.gif") as img:
        assert img.size == (128, 128)
    res = runner.invoke(app, ["annotate", str(tmp_path / "t.npz"), "--captioned-gif", "--gif-size", "96", "-q"])
    assert res.exit_code == 0, res.output
    with Image.open(tmp_path / "t.annotated.gif") as img:
        assert img.size[0] == 96 and img.size[1] > 96  # the caption strip below
    res = runner.invoke(app, ["simulate", "-t", "0", "--gif", str(tmp_path / "x.gif"), "--gif-size", "8"])
    assert res.exit_code == 2 and "--gif-size" in res.output


def test_timeline_rows_are_per_pattern_and_body_group():
    ann = Annotation.from_events(
        [
            PatternEvent("touch", 4, {"object_a": "red ball", "object_b": "ground"}),
            PatternEvent("bounce", 3, {"object": "red ball"}),
            PatternEvent("bounce", 5, {"object": "green ball", "speed": 2.0}),
            PatternEvent("touch", 6, {"object_a": "red ball", "object_b": "ground"}),
            PatternEvent("rest", 9, {"note": "all"}),
        ],
        num_frames=10, patterns=["touch", "bounce", "rest", "never"],
    )
    rows = timeline_rows(ann, {"red ball", "green ball", "ground"})
    assert [(p, b, [e.frame for e in evs]) for p, b, evs in rows] == [
        ("touch", ("red ball", "ground"), [4, 6]),
        ("bounce", ("green ball",), [5]),
        ("bounce", ("red ball",), [3]),
        ("rest", (), [9]),  # "all" names no body
        ("never", (), []),
    ]


def test_captions_list_events_since_the_previous_shown_frame():
    ann = Annotation.from_events(
        [
            PatternEvent("bounce", 3, {"object": "red ball"}),
            PatternEvent("touch", 4, {"object_a": "red ball", "object_b": "ground"}),
            PatternEvent("touch", 5, {"object_a": "red ball", "object_b": "ground"}),
            PatternEvent("rest", 9, {}),
        ],
        num_frames=10, patterns=["touch", "bounce", "rest"],
    )
    caps = frame_captions(ann, [0, 4, 8, 9])
    assert caps[0] == []
    assert caps[1] == ["touch: red ball, ground", "bounce: red ball"]  # frames 1-4, library order
    assert caps[2] == ["touch: red ball, ground"]  # frames 5-8
    assert caps[3] == ["rest"]


def test_captioned_gif(tmp_path, drop_trace, small_library):
    ann = annotate(drop_trace, small_library)
    path = captioned_gif(drop_trace, ann, tmp_path / "r.gif", stride=8)
    with Image.open(path) as img:
        assert img.format == "GIF"
        expected = len(range(0, drop_trace.num_frames, 8)) + (1 if (drop_trace.num_frames - 1) % 8 else 0)
        assert img.n_frames == expected
        assert img.size[1] > 256  # the caption strip under the frame


def test_cli_annotate(tmp_path, drop_traces, small_library):
    from simpatterns.cli import app

    data = tmp_path / "traces"
    (data / "sub").mkdir(parents=True)
    drop_traces[0].save(data / "a.npz")
    drop_traces[1].save(data / "sub" / "b.npz")
    small_library.save(tmp_path / "lib")
    runner = CliRunner()
    out = tmp_path / "out"
    res = runner.invoke(app, ["annotate", str(data), "--library", str(tmp_path / "lib"), "--out", str(out),
                              "--text", "--plot"])
    assert res.exit_code == 0, res.output
    for stem, where in (("a", out), ("b", out / "sub")):
        ann = Annotation.load(where / f"{stem}.annotation.jsonl")
        assert ann.patterns == small_library.labels and ann.events
        assert (where / f"{stem}.txt").read_text().startswith("Scene: ")
        assert (where / f"{stem}.timeline.png").stat().st_size > 0
    # again: both up to date, so one note and no (empty) table; --json gives an empty list
    res = runner.invoke(app, ["annotate", str(data), "--library", str(tmp_path / "lib"), "--out", str(out)],
                        terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "2 of 2 annotation(s) up to date, skipped" in res.output and "patterns fired" not in res.output
    res = runner.invoke(app, ["annotate", str(data), "--library", str(tmp_path / "lib"), "--out", str(out), "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout) == []
    # one file: the text goes to stdout too; annotations land beside the trace by default
    res = runner.invoke(app, ["annotate", str(data / "a.npz"), "--library", str(tmp_path / "lib"), "--text"])
    assert res.exit_code == 0, res.output
    assert "Timeline" in res.output and (data / "a.annotation.jsonl").is_file()
    header = json.loads((data / "a.annotation.jsonl").read_text().splitlines()[0])
    assert header["format"] == "simpatterns-annotation"
    # an unreadable file is reported, the others still annotated, exit code 1
    (data / "broken.npz").write_bytes(b"junk")
    res = runner.invoke(app, ["annotate", str(data), "--library", str(tmp_path / "lib"), "--out", str(tmp_path / "o2")])
    assert res.exit_code == 1
    assert "broken.npz" in " ".join(res.output.split()) and (tmp_path / "o2" / "a.annotation.jsonl").is_file()
    res = runner.invoke(app, ["annotate", str(tmp_path / "nothing")])
    assert res.exit_code == 2


def test_cli_annotate_names_an_output_path_it_cannot_write(tmp_path, drop_traces, small_library):
    from simpatterns.cli import app

    drop_traces[0].save(tmp_path / "new" / "a.npz")  # Trace.save creates missing folders
    small_library.save(tmp_path / "lib")
    (tmp_path / "taken").write_text("")
    res = CliRunner().invoke(app, ["annotate", str(tmp_path / "new"), "--library", str(tmp_path / "lib"),
                                   "--out", str(tmp_path / "taken" / "out")])
    assert res.exit_code == 2, res.output
    assert "error:" in res.output and "taken" in res.output
