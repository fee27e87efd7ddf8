"""Our benchmarks and data in the tools researchers already use.

- `integrations.inspect`: the Q&A and agent benchmarks as Inspect tasks
  (``inspect eval simpatterns/qa``; the ``inspect`` extra);
- `integrations.lmeval`: the Q&A benchmark as an lm-evaluation-harness task
  (``lm_eval --include_path``; the ``lmeval`` extra);
- `integrations.hf`: a Hugging Face ``datasets`` folder of traces and annotations (the ``hf`` extra);
- `integrations.minari`: PHYRE-environment rollouts as a Minari dataset (the ``minari`` extra).

Each imports its tool lazily or only in its own module, so ``import simpatterns`` never needs them.
"""
