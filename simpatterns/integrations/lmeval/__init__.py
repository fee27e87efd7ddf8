"""The Q&A benchmark as lm-evaluation-harness tasks (``pip install 'simpatterns[lmeval]'``).

The task files ship in this package's ``tasks`` folder; point the harness at it::

    lm_eval --include_path "$(python -m simpatterns.integrations.lmeval)" \\
        --tasks simpatterns_qa_annotation --metadata '{"questions": "data/qa"}' \\
        --model local-chat-completions --apply_chat_template \\
        --model_args model=MODEL,base_url=http://localhost:8000/v1/chat/completions

One generate-until task per text condition (``annotation``, ``state``, ``objects``;
the group ``simpatterns_qa`` runs all three). Each document is one question with
the messages our runner sends (`qa.context.ContextBuilder`): the system prompt as
the task description (the system message under ``--apply_chat_template``) and the
user message as the prompt. `tasks/utils.py` grades each answer with our strict
parser: ``acc`` and ``unparsable`` equal `simpatterns qa score` on the same answers.
``--metadata`` takes ``questions`` (required: a data set directory or its
questions.jsonl), ``templates`` ('1-17,22') and ``library`` ('builtin' or a directory).
"""

from __future__ import annotations

from pathlib import Path

TASKS = ("simpatterns_qa_annotation", "simpatterns_qa_state", "simpatterns_qa_objects")
GROUP = "simpatterns_qa"


def include_path() -> Path:
    """The folder to pass to ``lm_eval --include_path``."""
    return Path(__file__).resolve().parent / "tasks"


__all__ = ["GROUP", "TASKS", "include_path"]
