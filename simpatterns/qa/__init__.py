"""The Q&A benchmark (paper §4.1, §4.2, §4.4, Appendix C): templates with deterministic answers,
data sets of PHYRE rollouts, conditions, a resumable runner on the LLM layer, scoring with baselines,
reports, library studies and self-discovery with Q&A retention. See docs/reference/qa.md."""

from simpatterns.qa.context import CONDITIONS, ContextBuilder, ContextOptions
from simpatterns.qa.facts import TraceFacts
from simpatterns.qa.generate import GenerateConfig, generate_dataset
from simpatterns.qa.parse import grade, parse_answer
from simpatterns.qa.questions import Question, QuestionFormatError, read_questions, write_questions
from simpatterns.qa.report import score_run, write_report
from simpatterns.qa.runner import QAOutcome, EvalSettings, QARunError, read_responses, run_eval
from simpatterns.qa.scoring import grade_run, random_chance, summarise
from simpatterns.qa.selfdiscovery import SelfDiscoveryConfig, self_discover
from simpatterns.qa.studies import importance, library_curve
from simpatterns.qa.templates import TEMPLATES, QuestionRules, QuestionTemplate, get_template
from simpatterns.qa.views import restrict, truncate

__all__ = [
    "CONDITIONS", "ContextBuilder", "ContextOptions", "QAOutcome", "EvalSettings", "GenerateConfig", "Question",
    "QuestionFormatError", "QuestionRules", "QuestionTemplate", "QARunError", "SelfDiscoveryConfig", "TEMPLATES",
    "TraceFacts", "generate_dataset", "get_template", "grade", "grade_run", "importance", "library_curve",
    "parse_answer", "random_chance", "read_questions", "read_responses", "restrict", "run_eval", "score_run",
    "self_discover", "summarise", "truncate", "write_questions", "write_report",
]
