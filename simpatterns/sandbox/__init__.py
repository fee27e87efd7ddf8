"""Running untrusted (LLM-written) detector code.

Code from an LLM only ever runs here. The layer sits above the detector
contract, which it enforces, and below `annotate` and `evolve`, which use it:

- `gate`: the AST gate, a cheap static filter that names why it rejects
  (`check_candidate`, `check_candidate_tree`, `check_untrusted` for a library);
- `reasons`: the rejection codes (`Reason`, `Rejected`), and the machinery's own
  errors (`SandboxError`, `SandboxRefused`: catchable without importing `pool`);
- `pool`: `Sandbox`, a pool of fork servers holding a job's traces, which runs
  a `Candidate` (or an untrusted `Detector`) in a confined child and checks
  what it returns (`SandboxResult`);
- `server`: the fork server itself (run as ``python -I``, one confined child
  per job: own session, rlimits, no network, chroot when root);
- `limits`: `SandboxLimits`, what one job may spend;
- `events`: the event schema checked on both sides of the boundary, and the
  canonical encoding the event hashes use.

Kept import-light: the fork server imports this package inside its isolated
interpreter, so nothing is imported here.
"""
