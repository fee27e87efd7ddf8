"""Errors of the LLM layer.

Every failure the layer reports is an `LLMError`; callers that drive many
requests (the evolver, the Q&A benchmark) catch that one class. Messages
name the request (its prompt hash) and what to do about it.
"""

from __future__ import annotations

from simpatterns.errors import SimpatternsError


class LLMError(SimpatternsError):
    """Base class of every error raised by `simpatterns.llm`."""

    prompt_hash: str | None = None


class LLMConfigError(LLMError):
    """Bad client specification, flags or environment (nothing was sent)."""


class LLMBackendError(LLMError):
    """One attempt failed.

    ``kind`` is one of ``timeout``, ``connection``, ``rate_limit``,
    ``server`` (5xx), ``malformed`` (a body that is not a chat completion),
    ``client`` (other 4xx: the request itself is wrong), ``grammar_rejected``
    (the server refused the structured-outputs grammar), ``grammar_invalid``
    (our grammar failed validation, so it was not sent), ``adjusted`` (the
    server refused a field by name or ``n`` > 1 and the backend now sends the
    request its way), ``no_vision`` (images sent to a model that takes none)
    or ``engine`` (in-process engine error). Only the first five are worth
    retrying; ``grammar_rejected`` and ``adjusted`` are sent again at once.
    """

    RETRYABLE = frozenset({"timeout", "connection", "rate_limit", "server", "malformed"})
    RESEND = frozenset({"grammar_rejected", "adjusted"})

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        status: int | None = None,
        retry_after: float | None = None,
        prompt_hash: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retry_after = retry_after
        self.prompt_hash = prompt_hash

    @property
    def retryable(self) -> bool:
        return self.kind in self.RETRYABLE


class LLMRetriesExhausted(LLMError):
    """Every allowed attempt of one request failed with a retryable error."""

    def __init__(self, prompt_hash: str, attempts: int, last_error: LLMBackendError) -> None:
        super().__init__(
            f"request {prompt_hash[:12]} failed after {attempts} attempt(s); "
            f"last error ({last_error.kind}): {last_error}"
        )
        self.prompt_hash = prompt_hash
        self.attempts = attempts
        self.last_error = last_error


class LLMBudgetExceeded(LLMError):
    """The hard token or request budget would be exceeded; nothing more is sent."""


class LLMReplayMissing(LLMError):
    """A replayed run asked for a prompt the transcript does not hold."""


class LLMTranscriptError(LLMError):
    """A transcript file is unreadable (names the file and line)."""
