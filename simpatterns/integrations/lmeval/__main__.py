"""``python -m simpatterns.integrations.lmeval`` prints the folder for ``lm_eval --include_path``."""

from simpatterns.integrations.lmeval import include_path

print(include_path())
