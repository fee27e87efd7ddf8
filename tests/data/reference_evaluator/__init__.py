"""The reference for the reward-program evaluator's speed-ups (issue 32, item 1): a frozen copy of
`simpatterns.dsl` evaluator, runtime, predicates, matching and geometry as they were before the
change, importing each other relatively and the rest (parser, checker, references) from simpatterns.
tests/dsl/test_dsl_eval_reference.py and benchmarks/dsl.py compare the live evaluator with it. Do not edit."""
