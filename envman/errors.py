"""The one exception family the CLI turns into a one-line message and an exit code.

Domain code raises these; ``envman.cli`` catches them once at the edge (fastapi-cli style).
"""

from __future__ import annotations


class EnvmanError(Exception):
    """A failure the user can act on: *what* went wrong, *where*, and *how to fix it*.

    ``exit_code`` follows the CLI contract: 2 for bad input (a name, a file, an option),
    1 for an operation that ran and failed (a build, a smoke test, a verdict).
    """

    exit_code = 1

    def __init__(self, what: str, *, where: str | None = None, fix: str | None = None) -> None:
        self.what = what
        self.where = where
        self.fix = fix
        super().__init__(self.line())

    def line(self) -> str:
        parts = [self.what]
        if self.where:
            parts[0] = f"{self.where}: {self.what}"
        if self.fix:
            parts.append(self.fix)
        # One line, always: user data (a path, a matrix value) must not break it.
        return " — ".join(p.replace("\n", " ").strip() for p in parts)


class UserError(EnvmanError):
    """Bad input: an unknown name, a malformed file, an invalid option value (exit 2)."""

    exit_code = 2


class MatrixError(UserError):
    """A matrix file (shipped or user-supplied) is malformed or inconsistent."""


class ResolveError(UserError):
    """A stack name matches nothing in the matrix."""


class RenderError(UserError):
    """A value cannot be rendered safely into a Dockerfile."""


class EngineError(EnvmanError):
    """The Docker engine is unreachable or refused an operation."""


class BuildError(EnvmanError):
    """An image build failed; carries the tail of the build log."""

    def __init__(self, what: str, *, log_tail: str = "", **kw) -> None:
        self.log_tail = log_tail
        super().__init__(what, **kw)


class SmokeError(EnvmanError):
    """A smoke test failed; the image was not promoted."""
