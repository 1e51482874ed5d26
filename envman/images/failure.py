"""What a failed build shows: the failing step once, the last lines that carry an error, and the
fix known for the error's class.

A build log repeats the failing ``RUN`` script (the step header, BuildKit's ``> [5/9] RUN ...``
summary, the Dockerfile excerpt) and buries the cause (``invalid peer certificate:
UnknownIssuer`` from uv, line 72 of 128). :func:`summarize` keeps what a user acts on; the full
log stays in its file. Pure: text in, text out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: How many error lines are shown, at most, and how long each may be.
MAX_LINES = 8
MAX_WIDTH = 240

_ERROR_WORDS = re.compile(
    r"error|failed|fatal|could not|couldn't|cannot|unable to|not found|denied|refused|timed out|"
    r"invalid|conflict|unsatisfiable|no matching distribution|no solution|because .* depends on|"
    r"temporary failure|name or service not known|unreachable|non-zero code|exit code|^e: ", re.IGNORECASE)
#: Lines that only repeat the step or frame the log: never an error line of their own.
_ECHO = re.compile(
    r"^\s*(#\d+ \[|#\d+ (DONE|CACHED)|step \d+/\d+ :|-{4,}|>\s*\[|\d+\s*\|\s|dockerfile:\d+|\s*\d+ \|)|"
    r"^\s*(RUN|COPY|FROM|ENV|ARG|LABEL|USER|WORKDIR)\s", re.IGNORECASE)
_VERTEX = re.compile(r"^#\d+ (\d+(\.\d+)? )?")
#: The step's script quoted in an error line: said once, as the failing step.
_SCRIPT = re.compile(r'process "/bin/(?:ba)?sh -c .*" (did not|returned)')
_CLASSIC_SCRIPT = re.compile(r"The command '/bin/(?:ba)?sh -c .*' returned")


@dataclass(frozen=True)
class ErrorClass:
    name: str
    pattern: re.Pattern[str]
    hint: str
    reason: str = ""  # the cause in a few words, for the first line


#: The docs sections a hint points to (the docs site's pages, by file and heading anchor).
DOCS_NETWORK = "docs/getting-started.md#offline-and-corporate-networks"
DOCS_NO_REGISTRY = "docs/getting-started.md#no-registry-at-all-a-base-from-your-distributions-mirror"

#: NVIDIA's CUDA apt repository, named in apt's and curl's failure lines.
_NVIDIA_APT = r"developer\.download\.nvidia\.com"
_UNREACHED = (r"temporary failure|could not resolve|failed to fetch|name or service not known|connection refused|"
              r"network is unreachable|timed out|no route to host|connection reset|unable to connect|"
              r"failed to connect|could not connect")

#: Known classes, checked in this order on the error lines (first match wins).
CLASSES = (
    ErrorClass("tampered", re.compile(
        r"does not match the sha256|hash sum mismatch|file has unexpected size|no_pubkey|badsig|"
        r"the following signatures were invalid|has fingerprint \S* ?, not|is not signed", re.IGNORECASE),
        "a download does not match what its recipe or signed index says: do not work around it; check the "
        "network path (proxy, mirror) for interference, or report it", "a download was tampered with or corrupted"),
    ErrorClass("tls", re.compile(
        r"invalid peer certificate|certificate verify failed|unknownissuer|self[- ]signed certificate|"
        r"x509: certificate|unable to get local issuer certificate|ssl: certificate", re.IGNORECASE),
        "TLS: a server's certificate is not trusted here (a proxy or a private index?): pass --ca-bundle FILE "
        "(your CA's PEM), or set ca_bundle under [network] in config.toml", "a TLS certificate is not trusted"),
    ErrorClass("resolver", re.compile(
        r"resolutionimpossible|conflicting dependencies|no solution found when resolving|"
        r"because .* depends on|no matching distribution found|could not find a version that satisfies|"
        r"unsatisfiable", re.IGNORECASE),
        "the requirements cannot be installed together with the stack's pins: compare them with the pins "
        "(envman matrix show STACK: packages) and loosen or change the pin that conflicts",
        "the requirements conflict"),
    ErrorClass("nvidia-apt", re.compile(
        rf"(?:{_UNREACHED}).*{_NVIDIA_APT}|{_NVIDIA_APT}.*(?:{_UNREACHED})", re.IGNORECASE),
        "NVIDIA's CUDA apt repository cannot be reached from this build, and no mirror option reaches it for "
        "you: build on a base made from your distribution's own mirror (the rows whose wheels carry their "
        f"CUDA libraries can), or pull the image through a registry that has it; see {DOCS_NO_REGISTRY}",
        "NVIDIA's apt repository could not be reached"),
    ErrorClass("registry", re.compile(
        rf"(?:/v2/|registry-1\.docker\.io|resolve source metadata).*(?:{_UNREACHED}|dial tcp|no such host|i/o timeout)",
        re.IGNORECASE),
        "a container registry could not be reached for the base image: --registry-mirror HOST pulls it through "
        "a registry that has it; with no registry at all, envman base make makes a base from your "
        f"distribution's own mirror for the rows whose wheels carry their CUDA libraries; see {DOCS_NO_REGISTRY}",
        "a container registry could not be reached"),
    ErrorClass("network", re.compile(
        r"temporary failure in name resolution|could not resolve host|name or service not known|"
        r"connection refused|network is unreachable|timed out|dial tcp|no route to host|"
        r"failed to resolve source metadata|failed to fetch|connection reset|tls handshake timeout", re.IGNORECASE),
        "network: the build could not reach a server: --registry-mirror HOST for base images, --pip-index / "
        "--pip-extra-index / --framework-index URL (or --wheelhouse DIR) for Python packages, --apt-mirror URL "
        f"for apt (or the same keys under [network] in config.toml); see {DOCS_NETWORK}",
        "a server could not be reached"),
)


@dataclass(frozen=True)
class Failure:
    """What a failed build shows after its first line (:meth:`lines`); :meth:`after` drops a hint
    that line already gives (a failed base rebuild carries its class's hint as its fix)."""

    step: str | None  # the failing step, once ("Step 5/9 : RUN ...", clipped)
    errors: tuple[str, ...]  # the last lines that carry an error, oldest first
    error_class: str | None  # one of CLASSES' names
    hint: str | None

    def after(self, fix: str | None) -> "Failure":
        """This failure as shown after an error line whose fix is ``fix``: without its hint when
        that is the same text (the line already says it)."""
        if self.hint and fix and " ".join(self.hint.split()) == " ".join(fix.split()):
            return Failure(self.step, self.errors, self.error_class, None)
        return self

    def lines(self) -> list[str]:
        out = []
        if self.step:
            out.append(f"  failing step: {self.step}")
        out += [f"  | {e}" for e in self.errors]
        if self.hint:
            out.append(f"  hint: {self.hint}")
        return out


def without_script(text: str) -> str:
    """``text`` with a quoted step script replaced by "the step's command" (the step is shown once)."""
    return _CLASSIC_SCRIPT.sub("The step's command returned", _SCRIPT.sub(r"the step's command \1", text))


def reason_of(error_class: str | None) -> str:
    return next((c.reason for c in CLASSES if c.name == error_class), "")


def _clip(text: str, width: int = MAX_WIDTH) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def summarize(what: str, log_tail: str, step: str | None = None) -> Failure:
    """The failing step (given by the builder's events, else found in the log), the last error
    lines of the log (without the lines that repeat the step) and the hint of the first known
    error class among them and ``what``."""
    found_step = step
    errors: list[str] = []
    for raw in log_tail.splitlines():
        line = _VERTEX.sub("", raw).strip()  # BuildKit's "#8 12.3 " prefix of a step's output
        if not line:
            continue
        m = re.match(r"^(?:#\d+ \[[^\]]*?(\d+/\d+)\]|step (\d+/\d+) :)\s*(.*)$", raw.strip(), re.IGNORECASE)
        if m and step is None:
            found_step = f"Step {m.group(1) or m.group(2)} : {m.group(3)}"
            continue
        if _ECHO.match(raw) or _ECHO.match(line):
            continue
        line = without_script(line)
        if _ERROR_WORDS.search(line) or any(c.pattern.search(line) for c in CLASSES):
            clipped = _clip(line)
            if clipped in errors:
                errors.remove(clipped)
            errors.append(clipped)
    errors = errors[-MAX_LINES:]
    cls = next((c for c in CLASSES for text in (*errors, what) if c.pattern.search(text)), None)
    return Failure(_clip(found_step, 200) if found_step else None, tuple(errors),
                   cls.name if cls else None, cls.hint if cls else None)
