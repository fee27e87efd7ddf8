"""A candidate is parsed once on its way from the proposer to the library, and the tree the
proposer builds for an LLM answer is the module's own."""

from __future__ import annotations

import ast

import pytest

from simpatterns.evolve.config import EvolveConfig
from simpatterns.evolve.discovery import DiscoveryJob
from simpatterns.evolve.prompt import LabelSpec, Version, assemble, build_prompt
from simpatterns.evolve.proposers import LLMProposer, OfflineProposer
from simpatterns.evolve.runlog import RunLog
from simpatterns.llm import make_client
from simpatterns.llm.testing import Reply, ScriptedLLMServer
from simpatterns.sandbox.limits import SandboxLimits

MARKER = "# one parse only"


@pytest.fixture
def parses(monkeypatch):
    """Every source `ast.parse` is given in this process."""
    seen: list[str] = []
    real = ast.parse

    def counting(source, *args, **kwargs):
        seen.append(source if isinstance(source, str) else "")
        return real(source, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", counting)
    return seen


def config(**kw) -> EvolveConfig:
    return EvolveConfig(samples_per_label=1, batch_size=1, workers=1, seed=3,
                        sandbox=SandboxLimits(timeout_s=5.0, smoke_timeout_s=2.0, memory_mb=512), **kw)


def test_an_llm_answer_is_parsed_once_from_answer_to_library(traces, builtin, small_library, tmp_path, parses):
    good = builtin.get("airborne").source.replace("def detect(trace, events):",
                                                    f"def detect_v1(trace, events):\n    {MARKER}")
    answer = f"Here it is.\n```python\n{good}```\n"
    spec = LabelSpec("airborne", builtin.get("airborne").description, params=["object", "frames"])
    with ScriptedLLMServer(replies=[Reply(answer)]) as server:
        client = make_client("openai", base_url=server.base_url)
        job = DiscoveryJob(traces[:8], [spec], small_library, tmp_path / "run", tmp_path / "lib",
                           LLMProposer(client), config())
        lib = job.run()
        client.close()
    [sample] = [r for _, r in RunLog(tmp_path / "run").records() if r["type"] == "sample"]
    assert sample["status"] == "registered" and job.state.done[0].accepted, job.state.done[0].why
    entry = lib.get("airborne").source
    assert MARKER in entry and "def detect(trace, events)" in entry and not lib.is_trusted("airborne")
    # the answer through the gate, the sandbox, the fitness, the database and into the library: one parse
    assert sum(MARKER in s for s in parses) == 1, [s[:80] for s in parses if MARKER in s]


def test_an_offline_mutation_is_parsed_once_from_proposal_to_library(traces, builtin, small_library, tmp_path,
                                                                     parses):
    seed = tmp_path / "seed.py"
    seed.write_text(builtin.get("high energy impact").source.replace("HIGH_SPEED = 100.0", "HIGH_SPEED = 40.0"))
    spec = LabelSpec("high energy impact", "a hard collision", depends=["collision start"],
                     params=["object_a", "object_b", "speed"], seed=str(seed))
    job = DiscoveryJob(traces[:8], [spec], small_library, tmp_path / "run", tmp_path / "lib", OfflineProposer(),
                       config())
    lib = job.run()
    [sample] = [r for _, r in RunLog(tmp_path / "run").records() if r["type"] == "sample"]
    assert sample["code"] and "HIGH_SPEED = 40.0" not in sample["code"]
    # the mutation operator parses the parent it edits (the seed) and then the child, once; the child
    # goes through the gate, the sandbox, the fitness and the database without another parse
    assert sum(s == sample["code"] for s in parses) == 1
    assert job.state.done[0].accepted, job.state.done[0].why
    if lib.get("high energy impact").source == sample["code"]:  # the mutation won: into the library, unparsed
        assert sample["status"] == "registered"


SPEC = LabelSpec("fast mover", "A body moves faster than a threshold.", params=["object"])
BASE = '''import numpy as np

PATTERN = "fast mover"
DESCRIPTION = "A body moves faster than a threshold."
DEPENDS = []
PARAMS = ["object", "frames"]
BODY_PARAMS = ["object"]
DURATION = "interval"

THRESHOLD = 120.0  # px/s


def detect(trace, events):
    s = trace.speed()
    return [(int(f), {"object": n, "frames": 1}) for j, n in enumerate(trace.names)
            for f in np.nonzero(s[:, j] > THRESHOLD)[0][:1]]
'''
BODY = '''    s = trace.speed()
    return [(0, {"object": trace.names[0], "frames": 2})] if s.max() > 1 else []
'''


def answers() -> list[str]:
    v1 = BASE.replace("def detect(", "def detect_v1(")
    return [
        v1,
        f"```python\n{v1}```",
        f"```python\n{BODY}```",
        BODY,
        v1.replace("def detect_v1(", "def detect_v0(trace, events):\n    return []\n\n\ndef detect_v1("),
        v1.replace('PATTERN = "fast mover"', 'PATTERN = "something else"'),
        "# comment first\n" + v1.replace("import numpy as np\n", "import numpy as np\nimport math\n"),
        v1.replace("\n", "\r\n"),
        v1.replace("import numpy as np\n", ""),  # np. used without the import: the import is added
        v1.replace('PARAMS = ["object", "frames"]\n', 'PARAMS = ["object"]\n'),  # the base's DURATION no longer fits
        v1.replace("def detect_v1(", "@staticmethod\ndef detect_v1("),
        v1 + "\n\nALIAS = detect_v1\n",
        '"""notes:\ndef detect_v1(trace):\n"""\n' + BASE,  # the version's name only inside a string
        "x = 'ünïcödé'\n" + v1.replace("DEPENDS = []\n", ""),
        "import numpy as np; import math\n" + v1,  # two statements on one line
    ]


@pytest.mark.parametrize("answer", answers(), ids=range(len(answers())))
def test_the_assembled_tree_is_the_modules_own(answer, parses):
    prompt = build_prompt(SPEC, [Version(BASE, 0.5, 1)], 0, 0, {}, api_text="API")  # asks for detect_v1
    parses.clear()
    source, tree = assemble(answer, prompt, SPEC)
    # one parse, the answer's; two when "def detect_v1(" only sits in a string (the answer is then read as
    # written), or when two statements share a line (copied once each: the module is read again)
    assert len(parses) == (2 if '"""notes' in answer or "; import math" in answer else 1)
    assert "def detect(trace, events)" in source and "detect_v1" not in source.split('"""')[-1]
    assert ast.dump(tree, include_attributes=True) == ast.dump(ast.parse(source), include_attributes=True)


def test_a_mutation_comes_with_the_tree_of_the_child():
    for seed in range(5):
        out = OfflineProposer().propose_sync([Version(BASE, 0.5, 1)], seed)
        assert out.source is not None and out.source != BASE and out.tree is not None
        assert ast.dump(out.tree, include_attributes=True) == ast.dump(ast.parse(out.source), include_attributes=True)
