"""The console blocks of README.md, docs/, matrices/ and examples/: commands whose output the docs
show, run again.

A *console block* is a fenced block with at least one prompt line (``$ CMD``, ``alice$ CMD``) and
at least one line of output. The line just before its fence (blank lines between are allowed) may
say how it is checked:

- no comment, or ``<!-- console: unit -->``: the unit tests run it (``tests/unit/rules/test_doc_console.py``),
  with no engine, on a host without a GPU;
- ``<!-- console: docker -->``: the integration tests run it on the real engine
  (``tests/docker/test_doc_console.py``);
- ``<!-- console: unchecked: REASON -->``: not run; the reason says why (a GPU, a Slurm cluster,
  two users, the live PyPI ...) and is required.

Options after ``unit`` / ``docker``: ``setup=NAME`` (a function of :data:`SETUPS` writes the files
the commands read, before each command), ``as=PATH`` (the path the docs show for the sandbox the
commands run in), ``home=~`` (the sandbox's HOME is shown as ``~``).

Each ``$`` line is run as the docs write it, within a small grammar (no shell): ``[cd DIR &&]
[VAR=value ...] envman ARGS [| head -N | tail -N | grep -E PATTERN ...] [# comment]``. stdout and
stderr are read together, as a terminal shows them; a piped command shows its stdout through the
filters only. A line ``(exit N)`` after the output is the
exit status the command must have; without it, an output with a line ``envman: error: ...`` must
exit non-zero and any other must exit 0.

Real and shown output are compared after the normalisations of :data:`NORMALISE`, each listed with
why it is there (timings, image ids and digests, dates, trailing blanks), and the sandbox's paths
shown as ``as=`` / ``~`` say. In the shown output, a line ``...`` stands for any lines (none
included) and ``[…]`` for any text within a line: the docs cut long output so, and say so.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("unit", "docker", "unchecked")
PROMPT = re.compile(r"^([a-z]*)\$ (.*)$")
MARKER = re.compile(r"^<!--\s*console:\s*(.*?)\s*-->$")
FENCE = re.compile(r"^( *)(```+|~~~+)")
EXIT = re.compile(r"^\(exit (\d+)\)$")


class BlockError(ValueError):
    """A console block the test cannot read or run as written: the message says where and why."""


@dataclass(frozen=True)
class Step:
    """One prompt line and the output the docs show after it."""

    prompt: str
    line: str
    shown: tuple[str, ...]
    exit: int | None


@dataclass(frozen=True)
class Block:
    path: str
    line: int  # of the opening fence, 1-based
    check: str
    reason: str = ""
    options: dict[str, str] = field(default_factory=dict)
    steps: tuple[Step, ...] = ()

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def doc_files(root: Path = ROOT) -> list[Path]:
    """The Markdown a user reads: the README, the docs site, and the READMEs of the matrix files
    and the examples."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md")), *sorted((root / "matrices").glob("*.md")),
            *sorted((root / "examples").rglob("*.md"))]


def read_blocks(path: Path, root: Path = ROOT) -> list[Block]:
    """Every console block of one Markdown file; :class:`BlockError` for a malformed marker, or a
    marker that stands before no console block."""
    rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            if MARKER.match(lines[i].strip()) and not _next_is_fence(lines, i):
                raise BlockError(f"{rel}:{i + 1}: a console marker must stand just before a fenced block")
            i += 1
            continue
        indent, fence = m.groups()  # a block inside a list item is indented as the item
        end = i + 1
        while end < len(lines) and not lines[end].lstrip(" ").startswith(fence):
            end += 1
        body = [line[len(indent):] if line.startswith(indent) else line for line in lines[i + 1:end]]
        marker = _marker_before(lines, i)
        steps = _steps(body)
        if steps is None:
            if marker is not None:
                raise BlockError(f"{rel}:{i + 1}: a console marker before a block that shows no command's output")
        else:
            check, reason, options = _parse_marker(marker, f"{rel}:{i + 1}")
            blocks.append(Block(rel, i + 1, check, reason, options, steps))
        i = end + 1
    return blocks


def all_blocks(root: Path = ROOT) -> list[Block]:
    return [b for p in doc_files(root) for b in read_blocks(p, root)]


def _next_is_fence(lines: list[str], i: int) -> bool:
    j = i + 1
    while j < len(lines) and not lines[j].strip():
        j += 1
    return j < len(lines) and bool(FENCE.match(lines[j]))


def _marker_before(lines: list[str], i: int) -> str | None:
    j = i - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    m = MARKER.match(lines[j].strip()) if j >= 0 else None
    return m.group(1) if m else None


def _parse_marker(text: str | None, where: str) -> tuple[str, str, dict[str, str]]:
    if text is None:
        return "unit", "", {}
    kind, _, rest = text.partition(":") if text.startswith("unchecked") else text.partition(" ")
    kind = kind.strip()
    if kind not in KINDS:
        raise BlockError(f"{where}: console marker {text!r}: the check is one of {', '.join(KINDS)}")
    if kind == "unchecked":
        if not rest.strip():
            raise BlockError(f"{where}: an unchecked console block must say why: <!-- console: unchecked: REASON -->")
        return kind, rest.strip(), {}
    options: dict[str, str] = {}
    for word in rest.split():
        key, eq, value = word.partition("=")
        if not eq or key not in ("setup", "as", "home") or not value:
            raise BlockError(f"{where}: console marker option {word!r}: give setup=NAME, as=PATH or home=~")
        options[key] = value
    if options.get("home", "~") != "~":
        raise BlockError(f"{where}: home={options['home']}: the only home the docs show is ~")
    if "setup" in options and options["setup"] not in SETUPS:
        raise BlockError(f"{where}: setup={options['setup']} is not one of tests/support/doc_console.py's SETUPS")
    return kind, "", options


def _steps(body: list[str]) -> tuple[Step, ...] | None:
    """The prompt lines and their output; ``None`` when the block shows no output of a command."""
    steps: list[Step] = []
    prompt: str | None = None
    line = ""
    shown: list[str] = []
    for text in body:  # lines before the first prompt (a comment, a root prompt) are no output
        m = PROMPT.match(text)
        if m:
            if prompt is not None:
                steps.append(_step(prompt, line, shown))
            prompt, line, shown = m.group(1), m.group(2), []
        elif prompt is not None:
            shown.append(text)
    if prompt is not None:
        steps.append(_step(prompt, line, shown))
    if not steps or not any(s.shown for s in steps):
        return None
    return tuple(steps)


def _step(prompt: str, line: str, shown: list[str]) -> Step:
    code = None
    if shown and (m := EXIT.match(shown[-1].strip())):
        code = int(m.group(1))
        shown = shown[:-1]
    return Step(prompt, line, tuple(shown), code)


# --- the command line grammar -------------------------------------------------------------------

@dataclass(frozen=True)
class Command:
    cd: str | None
    env: dict[str, str]
    args: list[str]
    filters: list[tuple[str, str]]  # ("head", "5"), ("tail", "9"), ("grep", PATTERN)


ASSIGN = re.compile(r"^[A-Z_][A-Z0-9_]*=")


def parse_line(line: str, home: str) -> Command:
    """``[cd DIR &&] [VAR=value ...] envman ARGS [| filter ...]``; ``~/`` as the shell expands it."""
    lex = shlex.shlex(line, posix=True, punctuation_chars="|&;")
    lex.whitespace_split = True
    lex.commenters = "#"
    try:
        words = list(lex)
    except ValueError as exc:
        raise BlockError(f"{line!r}: {exc}") from exc
    words = [_tilde(w, home) for w in words]
    cd = None
    if len(words) >= 3 and words[0] == "cd" and words[2] == "&&":
        cd, words = words[1], words[3:]
    env: dict[str, str] = {}
    while words and ASSIGN.match(words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    segments: list[list[str]] = [[]]
    for w in words:
        if w == "|":
            segments.append([])
        elif w in ("&&", ";", "||", "&", "|&"):
            raise BlockError(f"{line!r}: {w!r} is not in the grammar the docs test runs (one envman command, "
                             "then | head/tail/grep)")
        else:
            segments[-1].append(w)
    if not segments[0] or segments[0][0] != "envman":
        raise BlockError(f"{line!r}: not an envman command; mark the block docker or unchecked with the reason")
    filters = []
    for seg in segments[1:]:
        if seg[:1] == ["head"] and len(seg) == 2 and re.fullmatch(r"-\d+", seg[1]):
            filters.append(("head", seg[1][1:]))
        elif seg[:1] == ["tail"] and len(seg) == 2 and re.fullmatch(r"-\d+", seg[1]):
            filters.append(("tail", seg[1][1:]))
        elif seg[:2] == ["grep", "-E"] and len(seg) == 3:
            filters.append(("grep", seg[2]))
        else:
            raise BlockError(f"{line!r}: the filter {' '.join(seg)!r} is not one of head -N, tail -N, grep -E PATTERN")
    return Command(cd, env, segments[0][1:], filters)


def _tilde(word: str, home: str) -> str:
    """The shell's tilde expansion of a word that is ``~`` or begins with ``~/``."""
    if word == "~" or word.startswith("~/"):
        return home + word[1:]
    return word


def apply_filters(text: str, filters: list[tuple[str, str]]) -> str:
    lines = text.splitlines()
    for name, arg in filters:
        if name == "head":
            lines = lines[:int(arg)]
        elif name == "tail":
            lines = lines[-int(arg):] if int(arg) else []
        else:
            lines = [ln for ln in lines if re.search(arg, ln)]
    return "".join(ln + "\n" for ln in lines)


# --- comparing ----------------------------------------------------------------------------------

#: What differs from one run to the next and is not what the docs teach: (pattern, replacement, why).
NORMALISE: tuple[tuple[str, str, str], ...] = (
    (r"[ \t]+$", "", "trailing blanks (tables pad their last column)"),
    (r"\b\d+(?:\.\d+)? s\b", "<N> s", "timings"),
    (r"\(\d+ days? old\)", "(<N> days old)", "the matrix's age on the day of the run"),
    (r"\b(Docker|Podman) \d+\.\d+(?:\.\d+)?[^\s,;]*", r"\1 <version>", "the engine's release on the machine that runs the check"),
    (r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d)?Z?", "<date>", "dates and times"),
    (r"\b\d\d-\d\d \d\d:\d\d:\d\d\b", "<date>", "dates and times (short form)"),
    (r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{12,64}\b", "<hex>",
     "image ids, digests, content hashes and container ids"),
)


def normalise(text: str) -> str:
    for pattern, replacement, _why in NORMALISE:
        text = re.sub(pattern, replacement, text, flags=re.M)
    return text


def matches(shown: list[str] | tuple[str, ...], real: str) -> bool:
    """Whether the real output is what the docs show, after :func:`normalise`, with ``...`` lines
    and ``[…]`` cuts as wildcards."""
    parts = []
    for line in normalise("\n".join(shown)).split("\n") if shown else []:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append("".join(".*?" if i % 2 else re.escape(p) for i, p in enumerate(line.split("[…]"))) + r"\n")
    body = normalise(real)
    if body and not body.endswith("\n"):
        body += "\n"
    return re.fullmatch("".join(parts), body) is not None


def diff(shown: list[str] | tuple[str, ...], real: str) -> str:
    return "\n".join(difflib.unified_diff(list(shown), real.splitlines(), "docs", "real run", lineterm=""))


def expected_exit(step: Step) -> Callable[[int], bool]:
    if step.exit is not None:
        return lambda code: code == step.exit
    if any(line.startswith("envman: error:") for line in step.shown):
        return lambda code: code != 0
    return lambda code: code == 0


# --- sandboxes ----------------------------------------------------------------------------------

@dataclass
class Sandbox:
    """Where a block's commands run: ``root`` stands for ``as=`` in the docs, HOME is ``root/home``,
    the commands start in ``root/cwd`` unless a setup says otherwise; the terminal is 100 columns
    wide (``COLUMNS=N`` on a command line changes it)."""

    root: Path
    cwd: Path
    env: dict[str, str]

    @property
    def home(self) -> Path:
        return Path(self.env["HOME"])


def make_sandbox(root: Path, base_env: dict[str, str]) -> Sandbox:
    home = root / "home"
    (home / ".config").mkdir(parents=True)
    cwd = root / "cwd"
    cwd.mkdir()
    env = {k: v for k, v in base_env.items() if not k.startswith(("ENVMAN_", "XDG_"))}
    env.update(HOME=str(home), COLUMNS="100", TERM="dumb", NO_COLOR="1")
    return Sandbox(root, cwd, env)


def shown_paths(real: str, box: Sandbox, options: dict[str, str]) -> str:
    """The real output with the sandbox's paths as the docs write them."""
    if options.get("home") == "~":
        real = real.replace(str(box.home), "~")
    return real.replace(str(box.root), options.get("as", "/tmp/doc"))


# --- running a block ----------------------------------------------------------------------------

NOGPU_NOTE = "NVML: NVML Shared Library Not Found; nvidia-smi: not installed"


def run_block(block: Block, monkeypatch, *, engine: bool, timeout: float = 120,
              prepare: Callable[[Sandbox], None] | None = None) -> list[str]:
    """Each step of the block run in a fresh sandbox; the problems found, one line each (a diff).

    The host is one without a GPU, as the docs show it (``monkeypatch`` replaces the host check in
    this process; the child forked for each command inherits it). ``engine=False``: DOCKER_HOST
    names a socket nobody serves, so a command that needs an engine fails rather than use one.
    ``prepare(sandbox)`` runs once before the first command (a CA bundle behind a TLS proxy).
    The sandbox is a short path under /tmp: tables wrap by the width of the real paths in them,
    and the docs' paths (``/tmp/st-demo``) are as short."""
    from tests.support.cli import run_envman
    from envman import host

    monkeypatch.setattr(host, "detect", lambda **kw: host.HostFacts(host.NONE, note=NOGPU_NOTE))
    with tempfile.TemporaryDirectory(prefix="ed", dir="/tmp") as short:
        box = make_sandbox(Path(short), dict(os.environ))
        if not engine:
            for name in [k for k in box.env if k.startswith("DOCKER_") or k == "CONTAINER_HOST"]:
                del box.env[name]
            box.env["DOCKER_HOST"] = f"unix://{short}/no-engine.sock"
        if prepare is not None:
            prepare(box)
        problems = []
        for n, step in enumerate(block.steps):
            if "setup" in block.options:
                SETUPS[block.options["setup"]](box, n)
            cmd = parse_line(step.line, str(box.home))
            cwd = box.cwd if cmd.cd is None else box.cwd / cmd.cd
            # a pipe takes stdout only: what it shows is stdout through the filters
            result = run_envman(cmd.args, env={**box.env, **cmd.env}, cwd=cwd, merge_stderr=not cmd.filters,
                                timeout=timeout)
            real = shown_paths(apply_filters(result.stdout, cmd.filters), box, block.options)
            if not matches(step.shown, real):
                problems.append(f"{block.where}: $ {step.line}: the output differs\n{diff(step.shown, real)}")
            if not expected_exit(step)(result.returncode):
                problems.append(f"{block.where}: $ {step.line}: exit {result.returncode}")
        return problems


# --- setups: the files a block's commands read, written before command N ------------------------

def _setup_config_errors(box: Sandbox, n: int) -> None:
    cfg = box.cwd / "cfg"
    cfg.mkdir(exist_ok=True)
    text = ('[network]\npip_mirror = "https://pypi.corp.example/simple"\n' if n == 0
            else 'network = "https://pypi.corp.example/simple"\n')
    (cfg / "config.toml").write_text(text)


def _setup_cloned(box: Sandbox, n: int) -> None:
    if n:
        return
    cloned = box.root / "cloned"
    cloned.mkdir()
    (cloned / "envman.toml").write_text(CLONED_TOML)
    box.cwd = cloned


CLONED_TOML = """\
name = "cloned"
stack = "torch-2.4-cuda12.4"
command = ["python", "train.py"]
mounts = ["/srv/datasets:/data:ro"]
ports = ["8888:8888"]

[environment]
WANDB_API_KEY = "from-the-file"
"""


def _setup_evil(box: Sandbox, n: int) -> None:
    if n:
        return
    for name in ("cloned", "evil"):
        (box.root / name).mkdir()
    (box.root / "cloned" / "envman.toml").write_text('name = "cloned"\nstack = "torch-2.4-cpu"\n')
    (box.root / "evil" / "envman.toml").write_text(
        'name = "evil"\nstack = "torch-2.4-cpu"\nmounts = ["/var/run/docker.sock:/var/run/docker.sock"]\n')
    (box.home / ".ssh").mkdir(mode=0o700)
    box.cwd = box.root / "cloned"


def _setup_scratch(box: Sandbox, n: int) -> None:
    if n:
        return
    scratch = box.root / "scratch"
    work = scratch / "me" / "work"
    work.mkdir(parents=True)
    (scratch / "envman.toml").write_text('name = "shared"\nstack = "torch-2.4-cpu"\n')
    os.chmod(scratch, 0o777)
    box.cwd = work


def _setup_mine(box: Sandbox, n: int) -> None:
    if n == 0:
        (box.cwd / "mine.toml").write_text(MINE_TOML)
        (box.cwd / "mine-img.toml").write_text(MINE_IMG_TOML)


#: A user's rows that break three of matrix validate's rules: a tag NVIDIA never published, a
#: build that loads cuDNN 9 from images that ship cuDNN 8, and so a row that does not resolve.
MINE_TOML = """\
schema = 1
kind = "framework"
framework = "onnxruntime"

[[build]]
version = "1.18.1"
variant = "cuda12-mine"
cuda = "12.2"
cudnn = "9"
python = ["3.10", "3.11", "3.12"]
sass = ["8.0"]
packages = ["onnxruntime-gpu==1.18.1"]
system_cuda = true
system_cudnn = true
source = ["mine"]
status = "unconfirmed"
"""

MINE_IMG_TOML = """\
schema = 1
kind = "images"

[[image]]
repository = "nvidia/cuda"
tag = "12.2.1-cudnn8-runtime-ubuntu22.04"
cuda = "12.2.1"
flavour = "cudnn-runtime"
cudnn = "8"
os = "ubuntu22.04"
status = "published"
source = ["mine"]
"""


def _setup_newcomer(box: Sandbox, n: int) -> None:
    """A fresh machine's user in ``~/proj``; the commands from ``project init`` on run there."""
    if n == 0:
        (box.home / "proj").mkdir()
        box.cwd = box.home / "proj"


def _setup_standin_tour(box: Sandbox, n: int) -> None:
    """A project ``alpha`` on the integration tests' stand-in stack, with ``sub/deep`` (the docker
    test adds the stand-in stacks' matrix files and state)."""
    if n == 0:
        (box.root / "alpha" / "sub" / "deep").mkdir(parents=True)
        (box.root / "alpha" / "envman.toml").write_text('stack = "torch-0.0.2-cuda12.8"\ngpus = "none"\n')
        box.cwd = box.root


def _setup_vision(box: Sandbox, n: int) -> None:
    """A project asking for two GPUs, a command and a secret-looking variable, trusted by its user."""
    from tests.support.cli import run_envman

    if n == 0:
        (box.cwd / "vision").mkdir()
        (box.cwd / "vision" / "envman.toml").write_text(
            'name = "vision"\nstack = "torch-2.4-cuda12.4"\ngpus = 2\ncommand = ["python", "train.py"]\n\n'
            '[environment]\nWANDB_API_KEY = "from-the-file"\n')
        trusted = run_envman(["project", "trust", "vision/envman.toml"], env=box.env, cwd=box.cwd)
        if trusted.returncode != 0:
            raise BlockError(f"setup vision: envman project trust failed: {trusted.stderr.strip()}")


SETUPS: dict[str, Callable[[Sandbox, int], None]] = {
    "vision": _setup_vision,
    "standin-tour": _setup_standin_tour,
    "mine": _setup_mine,
    "newcomer": _setup_newcomer,
    "config-errors": _setup_config_errors,
    "cloned": _setup_cloned,
    "evil": _setup_evil,
    "scratch": _setup_scratch,
}
