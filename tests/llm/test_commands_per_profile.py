"""Every model-calling command against every server profile (`simpatterns.llm.testing.PROFILES`).

`reward compile`, `llm complete`, `discover`, `qa eval` (each condition) and `agent eval` (the
language-model agent) run through the CLI against a scripted server playing each real server.
What the server logged (`server.log`: the grammar it enforced, what it refused) is held against
what the client sent and what its transcript claims; docs/reference/llm.md's profile table is checked
against both.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simpatterns.cli import app
from simpatterns.detectors.library import PatternLibrary
from simpatterns.llm.openai_backend import VISION_PROBE_TEXT
from simpatterns.llm.testing import PROFILES, Reply, ScriptedLLMServer
from simpatterns.qa.context import CONDITIONS

DOCS = Path(__file__).resolve().parents[2] / "docs" / "reference" / "llm.md"
GOAL = "Make the green object touch the blue object while the red ball never touches the green object"
# in the grammar of the full prompt and of the compact one ("collision start" is not among the patterns a
# compact prompt shows for this goal): the client checks that answers keep to the grammar they were sent
PROGRAM = ('AND(EVENT("touch start", {"object_a": "green ball", "object_b": "blue ball"}), '
           'NEVER("touch start", {"object_a": "red ball", "object_b": "green ball"}))')
AGENT_TASK, AGENT_BINS = "00002:002", 3
GRAMMAR_FIELDS = ("structured_outputs", "guided_grammar", "grammar")
# where the client does not do what the table says yet: (command, profile) -> why ("*" for any)
PENDING: dict[tuple[str, str], str] = {}


def pending(command: str, profile: str) -> list:
    reason = PENDING.get((command, profile)) or PENDING.get((command, "*")) or PENDING.get(("*", profile))
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []


def cases(command: str) -> list:
    return [pytest.param(name, marks=pending(command, name), id=name) for name in PROFILES]


# ---- the documented table ---------------------------------------------------------------------

def profile_table() -> dict[str, dict[str, str]]:
    """docs/reference/llm.md's table under "Server profiles": profile name -> column -> cell."""
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("### Server profiles", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    table = {}
    for line in rows[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        row = dict(zip(header, cells))
        table[row["profile"].strip("`")] = row
    return table


def test_the_table_names_every_profile_and_says_what_the_server_does():
    table = profile_table()
    assert sorted(table) == sorted(PROFILES)
    for name, p in PROFILES.items():
        row = table[name]
        assert f"`{p.owned_by}`" in row["owned_by"], name
        n = {"all": "n choices", "one": "1 choice"}.get(p.n) or f"HTTP {p.n_refusal.status}"
        assert row["n > 1 (server)"] == n, name
        images = ("seen" if p.vision else f"HTTP {p.image_refusal.status}" if p.image_refusal
                  else "passed through unseen")
        assert row["images (server)"] == images, name
        enforced = ", ".join(f"`{f}`" for f in p.grammar_fields) or "none"
        assert row["grammar enforced (server)"] == enforced, name


# ---- fixtures ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def builtin() -> PatternLibrary:
    return PatternLibrary.builtin()


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory) -> Path:
    from simpatterns.simulators.phyre import get_template, simulate

    template = get_template("00000")
    params = list(template.valid_param_sets())
    d = tmp_path_factory.mktemp("traces")
    made = 0
    for k, p in enumerate(params[:20]):
        rollout = simulate(template.scene(p), (0.2 + 0.03 * k, 0.5, 0.3), max_steps=120)
        if rollout.trace is not None:
            rollout.trace.save(d / f"t{made:03d}.npz")
            made += 1
        if made == 4:
            break
    return d


@pytest.fixture(scope="module")
def discover_inputs(tmp_path_factory, builtin) -> tuple[Path, Path, str]:
    d = tmp_path_factory.mktemp("discover")
    labels = d / "labels.toml"
    labels.write_text('[[label]]\nlabel = "high energy impact"\ndescription = "a hard hit"\n'
                      'depends = ["collision start"]\nparams = ["object_a", "object_b", "speed"]\n'
                      '[evolve]\nbatch_size = 2\nworkers = 1\n')
    base = builtin.subset(["collision start"]).save(d / "base")
    answer = "```python\n" + builtin.get("high energy impact").source + "```"
    return labels, base, answer


@pytest.fixture(scope="module")
def qa_data(tmp_path_factory) -> Path:
    data = tmp_path_factory.mktemp("qa") / "data"
    res = CliRunner().invoke(app, ["qa", "generate", "--out", str(data), "--scenes", "1", "--questions-per-rollout",
                                   "1", "--templates", "1", "--no-stable", "--seed", "2", "-q"])
    assert res.exit_code == 0, res.output
    return data


@pytest.fixture(scope="module")
def agent_menu(tmp_path_factory) -> tuple[Path, str]:
    from simpatterns.agents.menu import MenuStore

    cache = tmp_path_factory.mktemp("menus")
    menu = MenuStore(cache, AGENT_BINS).get(AGENT_TASK)
    return cache, menu.choices[menu.solving[0]].id


def llm_flags(server: ScriptedLLMServer) -> list[str]:
    # a hosted API lists many models: name the one the profile serves
    return ["--llm", "openai", "--base-url", server.base_url, "--model", server.model]


# ---- what to check after every command ---------------------------------------------------------

def transcript(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def sent_grammar_fields(server: ScriptedLLMServer) -> set[str]:
    return {f for body in server.requests for f in GRAMMAR_FIELDS if f in body}


def check_exchange(server: ScriptedLLMServer, records: list[dict], *, grammar: bool) -> None:
    """What holds against every server: the client adapts after at most one refusal of a kind;
    `constrained` is claimed exactly where the server enforced the grammar; every answer has the
    choices asked for; a seeded request to llama-server turns its prompt cache off."""
    profile = server.profile
    refusals = [s.error for s in server.log if s.status != 200]
    assert len(refusals) == len(set(refusals)), f"the same refusal twice: {refusals}"
    ok = [r for r in records if r["status"] == "ok"]
    assert ok, "no answer"
    served = [s for s in server.log if s.status == 200]
    claimed = [r["constrained"] for r in ok]
    if grammar and profile_table()[profile.name]["constrained"] == "yes":
        assert all(s.grammar_applied for s in served), [s.ignored for s in served]
        assert all(claimed)
    else:
        assert not any(claimed), "claims constrained decoding the server was not known to apply"
    for r in ok:
        assert len(r["response"]["texts"]) == r["request"]["n"]
    if profile.cache_prompt_field:
        seeded = [s for s, body in zip(server.log, server.requests) if body.get("seed") is not None]
        assert all(s.cache_prompt is False for s in seeded)


def check_table_row(server: ScriptedLLMServer, records: list[dict]) -> None:
    """The documented row (what is sent, whether decoding is constrained) is what happened."""
    row = profile_table()[server.profile.name]
    fields = sorted(sent_grammar_fields(server))
    assert (", ".join(f"`{f}`" for f in fields) or "none") == row["grammar sent as"]
    constrained = {r["constrained"] for r in records if r["status"] == "ok"}
    assert constrained == {row["constrained"] == "yes"}
    limits = {f for body in server.requests for f in ("max_tokens", "max_completion_tokens") if f in body}
    assert ", ".join(f"`{f}`" for f in sorted(limits)) == row["token limit sent as"]
    temperature = {"temperature" in body for body in server.requests}
    assert temperature == {row["temperature sent"] == "yes"}


# ---- the commands -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", cases("reward compile"))
def test_reward_compile(serve, tmp_path, name):
    server = serve(profile=name, default=Reply([PROGRAM, PROGRAM + " "]))
    log = tmp_path / "t.jsonl"
    res = CliRunner().invoke(app, ["reward", "compile", GOAL, "--scene", "00000:0", "-n", "2", "--record", str(log),
                                   "--out", str(tmp_path / "goal.rwd"), *llm_flags(server)])
    assert res.exit_code == 0, res.output
    records = transcript(log)
    check_exchange(server, records, grammar=True)
    check_table_row(server, records)


@pytest.mark.parametrize("name", cases("llm complete"))
def test_llm_complete(serve, tmp_path, name):
    server = serve(profile=name, default=Reply(["red and blue", "green and gold"]))
    log = tmp_path / "t.jsonl"
    res = CliRunner().invoke(app, ["llm", "complete", "Name two colours.", "-n", "2", "--seed", "1",
                                   "--record", str(log), *llm_flags(server)])
    assert res.exit_code == 0, res.output
    records = transcript(log)
    check_exchange(server, records, grammar=False)
    [answer] = [r for r in records if r["status"] == "ok"]
    assert all(t in res.output for t in answer["response"]["texts"])


@pytest.mark.parametrize("name", cases("discover"))
def test_discover(serve, tmp_path, trace_dir, discover_inputs, name):
    labels, base, answer = discover_inputs
    server = serve(profile=name, default=answer)
    log = tmp_path / "t.jsonl"
    res = CliRunner().invoke(app, ["discover", "--traces", str(trace_dir), "--labels", str(labels), "--out",
                                   str(tmp_path / "lib"), "--base-library", str(base), "--samples", "2", "--seed", "1",
                                   "--record", str(log), "-q", *llm_flags(server)])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "lib" / "library.json").is_file()
    check_exchange(server, transcript(log), grammar=False)


@pytest.mark.parametrize("name", cases("qa eval"))
def test_qa_eval_every_condition(serve, tmp_path, qa_data, name):
    server = serve(profile=name, default="ANSWER: yes")
    run = tmp_path / "run"
    text = [c for c in CONDITIONS if "frames" not in c]
    res = CliRunner().invoke(app, ["qa", "eval", str(qa_data), "--out", str(run), "--conditions", ",".join(text),
                                   "-q", *llm_flags(server)])
    assert res.exit_code == 0, res.output
    check_exchange(server, transcript(run / "transcript.jsonl"), grammar=False)
    assert all(s.images == 0 for s in server.log)
    # images: answered where the model sees them and the client can establish it (the server says, or
    # its usage shows the images counted as images), refused in one line before any goes out otherwise
    frames = [c for c in CONDITIONS if "frames" in c]
    before = len(server.requests)
    res = CliRunner().invoke(app, ["qa", "eval", str(qa_data), "--out", str(tmp_path / "frames"), "--conditions",
                                   ",".join(frames), "--max-images", "2", "--image-size", "32", "-q",
                                   *llm_flags(server)])
    # the client's capability probe (blank images, `require_images`) may come before the refusal
    probe = [json.dumps(b["messages"]).find(VISION_PROBE_TEXT) >= 0 for b in server.requests[before:]]
    with_images = [s for s, p in zip(server.log[before:], probe) if s.images and not p]
    if server.vision and server.profile.usage:
        assert res.exit_code == 0, res.output
        assert with_images and all(s.images_seen for s in with_images)
    else:
        assert res.exit_code != 0 and len(res.output.strip().splitlines()) == 1, res.output
        assert "image" in res.output
        assert not any(s.status == 200 for s in with_images), "images went to a model that cannot see them"


@pytest.mark.parametrize("name", cases("agent eval"))
def test_agent_eval_language_model_agent(serve, tmp_path, agent_menu, name):
    cache, solving = agent_menu
    server = serve(profile=name, default=f"CHOICE: {solving}")
    run = tmp_path / "run"
    res = CliRunner().invoke(app, ["agent", "eval", "--out", str(run), "--tasks", AGENT_TASK, "--bins",
                                   str(AGENT_BINS), "--seeds", "0", "--attempts", "2", "--cache", str(cache),
                                   "--agents", "llm", "--choice-grammar", *llm_flags(server)])
    assert res.exit_code == 0, res.output
    check_exchange(server, transcript(run / "transcript.jsonl"), grammar=True)


@pytest.mark.parametrize("name", ["vllm", "llama-cpp-python", "proxy"])
def test_a_server_that_ignores_max_tokens_cannot_overrun_the_budget(serve, tmp_path, name):
    # every answer is 100,000 tokens of prose, whatever max_tokens says; the proxy reports no usage
    server = serve(profile=name, default="I am not sure", runaway_tokens=100_000)
    log = tmp_path / "t.jsonl"
    budget, per_answer = 20_000, 1_000
    CliRunner().invoke(app, ["reward", "compile", GOAL, "--scene", "00000:0", "-n", "1", "-k", "40",
                             "--max-tokens", str(per_answer), "--max-total-tokens", str(budget), "--record", str(log),
                             "--out", str(tmp_path / "goal.rwd"), *llm_flags(server)])
    records = transcript(log)
    assert records and all(s.stream for s in server.log)
    used = sum(r["usage"]["prompt_tokens"] + r["usage"]["completion_tokens"] for r in records)
    assert used <= budget + per_answer
    assert all(r["usage"]["completion_tokens"] <= per_answer for r in records)
