"""Install scripts: the ``pip install`` and ``conda install`` lines of a repository's shell and
batch files that set up its environment (``install.sh``, ``scripts/install.bat``,
``setup_env.sh``, ...).

A script is what its authors run to install the project, so its install commands speak as a
Dockerfile's ``RUN`` lines do: pins (:data:`~envman.project.detect.facts.COMMAND`), not advice.
Variables set earlier in the script (``TORCH=1.9.0``, ``export CUDA=11.1``, batch ``set
TORCH=1.9.0``) are filled in; a command built from anything else (a variable set from a
command's output, an argument) gives nothing it cannot read. Nothing is executed.
"""

from __future__ import annotations

import re

from envman.project.detect.facts import COMMAND, Statement, clip_text
from envman.project.detect.images import command_facts, logical_lines, substitute
from envman.project.detect.repo import Repository

#: Script files by name: a shell or batch file whose name says it installs or sets up the
#: environment, at most two folders down (lower-cased paths).
SCRIPTS = (r"(?:[^/]+/){0,2}[^/]*(?:install|setup|env|requirement|dependenc|deps|prepare|conda)[^/]*"
           r"\.(?:sh|bash|bat|cmd)")

_SH_SET_RE = re.compile(r"^(?:export\s+|declare\s+(?:-x\s+)?|readonly\s+)?([A-Za-z_][A-Za-z0-9_]*)=(\S*)$")
_BAT_SET_RE = re.compile(r"^set\s+\"?([A-Za-z_][A-Za-z0-9_]*)=([^\"]*)\"?$", re.IGNORECASE)
_BAT_VAR_RE = re.compile(r"%([A-Za-z_][A-Za-z0-9_]*)%")


def read_script(repo: Repository, rel: str) -> list[Statement]:
    """The statements of one install script's install commands."""
    text = repo.read(rel)
    if text is None:
        return []
    batch = rel.lower().endswith((".bat", ".cmd"))
    out: list[Statement] = []
    values: dict[str, str] = {}
    lines = logical_lines(text, continuation="^", comment=_batch_comment) if batch else logical_lines(text)
    for no, line in lines:
        command = line.strip()
        if batch:
            command = re.sub(r"^@", "", command)
            setting = _BAT_SET_RE.match(command)
            if setting:
                values[setting.group(1).upper()] = _plain_value(setting.group(2))
                continue
            command = _BAT_VAR_RE.sub(lambda m: values.get(m.group(1).upper(), ""), command)
        else:
            setting = _SH_SET_RE.match(command)
            if setting:
                values[setting.group(1)] = _plain_value(setting.group(2))
                continue
            command = substitute(command, values)
        for word, fact in command_facts(command):
            out.append(Statement(rel, no, clip_text(line.strip()), "script", COMMAND, fact, notes=(word,)))
    return out


def _plain_value(value: str) -> str:
    """A variable's value when it is a plain word (quotes taken off); ``""`` when it is made by a
    command (``$(...)``, backticks) or another variable, which a reader cannot know."""
    value = value.strip().strip("'\"")
    return "" if re.search(r"[$`%()]", value) else value


def _batch_comment(line: str) -> bool:
    """A batch file's comment line: ``REM ...`` or ``:: ...`` (``@`` before it or not)."""
    bare = line.strip().lstrip("@")
    return bare.startswith("::") or re.match(r"rem(\s|$)", bare, re.IGNORECASE) is not None
