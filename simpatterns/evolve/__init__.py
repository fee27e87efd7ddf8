"""Pattern discovery: a FunSearch-style island evolver with a sandbox and a fitness.

Modules: `fitness` (Algorithm 2 and Appendix F), `database` (islands and
clusters), `prompt` (prompts and assembling answers), `mutation` and
`proposers` (LLM and offline), `rounds` (one round: prompts -> proposals ->
gate, sandbox, fitness -> sample records), `growth` (the library a job grows),
`selfdiscovery` (labels the LLM proposes), `records` (the log's typed records),
`state` (the job state they change; resume), `discovery` (Algorithm 1: the
job), `config`, `runlog`, `report`, `commands` (CLI). Untrusted code runs in
`simpatterns.sandbox`, below this package.
"""
