"""The Q&A benchmark (paper §4.1, App. C): templates, deterministic answers, conditions, scoring, studies."""
