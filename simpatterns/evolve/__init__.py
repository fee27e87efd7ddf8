"""Pattern discovery: a FunSearch-style island evolver with a sandbox and a fitness.

Modules: `gate` (static filter), `sandbox` / `forkserver` (confined
evaluation), `fitness` (Algorithm 2 and Appendix F), `database` (islands and
clusters), `prompt` (prompts and parsing answers), `mutation` and
`proposers` (LLM and offline), `discovery` (Algorithm 1, resume), `runlog`,
`report`, `commands` (CLI). Kept import-light: the sandbox's fork server
imports this package inside its isolated interpreter.
"""
