"""Install scripts: the ``pip install`` and ``conda install`` lines of a repository's shell and
batch files that set up its environment (``install.sh``, ``scripts/install.bat``,
``setup_env.sh``, ...), and the shell lines of its notebooks (``!pip install torch==1.13.1`` in a
Colab demo).

A script is what its authors run to install the project, so its install commands speak as a
Dockerfile's ``RUN`` lines do: pins (:data:`~envman.project.detect.facts.COMMAND`), not advice.
Variables set earlier in the script (``TORCH=1.9.0``, ``export CUDA=11.1``, batch ``set
TORCH=1.9.0``) are filled in; a command built from anything else (a variable set from a
command's output, an argument) gives nothing it cannot read. Nothing is executed.
"""

from __future__ import annotations

import json
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


#: Notebooks (``.ipynb``) at most two folders down; at most this many, each read up to this size
#: (outputs make them large; a notebook cut short is read as far as its lines go).
NOTEBOOKS = r"(?:[^/]+/){0,2}[^/]+\.ipynb"
MAX_NOTEBOOKS = 32
NOTEBOOK_LIMIT = 8 * 1024 * 1024
#: A code cell's line that IPython hands to a shell or to pip/conda: ``!cmd``, ``%pip``/``%conda``.
_NB_SHELL_RE = re.compile(r"^\s*(?:!|%(?=(?:pip|conda|mamba)\b))(.*)$")
_NB_CELL_MAGIC_RE = re.compile(r"^\s*%%(?:bash|sh|shell|script\s+(?:ba)?sh)\b")


def read_notebook(repo: Repository, rel: str) -> list[Statement]:
    """The statements of one notebook's install lines: in its code cells, lines IPython runs in a
    shell (``!pip install ...``, ``%pip install ...``, every line of a ``%%bash`` cell). Python
    values IPython would fill in (``{version}``, ``$var``) give nothing. Each statement names the
    notebook's own line. What a notebook installs is what its authors ran it with, so it speaks as
    a command; a notebook made for another machine (Colab) is advice, never a pin that ends
    detection (:attr:`~envman.project.detect.facts.Statement.hard`)."""
    text = repo.read(rel, limit=NOTEBOOK_LIMIT)
    if text is None:
        return []
    out: list[Statement] = []
    for no, line in _notebook_shell_lines(text):
        if "{" in line or "$" in line:
            continue
        for word, fact in command_facts(line):
            out.append(Statement(rel, no, clip_text(line.strip()), "notebook", COMMAND, fact, notes=(word,)))
    return out


def _code_cells(text: str) -> list[list[str]]:
    """The source lines of each code cell of a notebook, in order ([] for a notebook cut short or
    no notebook at all: nothing is guessed from a fragment)."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return []
    cells = doc.get("cells") if isinstance(doc, dict) else None
    if not isinstance(cells, list):  # nbformat 3 kept its cells in worksheets
        sheets = doc.get("worksheets") if isinstance(doc, dict) else None
        cells = [c for w in sheets if isinstance(w, dict) and isinstance(w.get("cells"), list) for c in w["cells"]] \
            if isinstance(sheets, list) else []
    out: list[list[str]] = []
    for cell in cells[:2000]:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", cell.get("input"))
        lines = source if isinstance(source, list) else str(source or "").splitlines(keepends=True)
        out.append([x for x in lines if isinstance(x, str)])
    return out


def notebook_code(text: str) -> str:
    """A notebook's Python: its code cells' lines, less those IPython hands to a shell and the cells
    of another language (``%%bash``), one line each, for :func:`~.code.imported` to read."""
    kept: list[str] = []
    for lines in _code_cells(text):
        if lines and lines[0].lstrip().startswith("%%"):
            continue
        kept += [raw.rstrip("\n") for raw in lines if not _NB_SHELL_RE.match(raw) and not raw.lstrip().startswith("%")]
    return "\n".join(kept)


def _notebook_shell_lines(text: str) -> list[tuple[int, str]]:
    """(line of the .ipynb file, shell command) of each code cell's shell line, in order."""
    cells = _code_cells(text)
    where = _json_string_lines(text) if cells else {}
    out: list[tuple[int, str]] = []
    for lines in cells:
        shell_cell = bool(lines) and _NB_CELL_MAGIC_RE.match(lines[0]) is not None
        for raw in lines[1:] if shell_cell else lines:
            command = raw.strip() if shell_cell else (m.group(1).strip() if (m := _NB_SHELL_RE.match(raw)) else "")
            if command and not command.startswith("#"):
                out.append((where.get(raw.rstrip("\n"), 0), command))
    return out


def _json_string_lines(text: str) -> dict[str, int]:
    """Each JSON string that stands alone on a line of ``text`` (a notebook's source lines, as
    nbformat writes them) → the first line it stands on."""
    out: dict[str, int] = {}
    for no, raw in enumerate(text.splitlines(), 1):
        item = raw.strip().rstrip(",")
        if item.startswith('"') and item.endswith('"') and len(item) >= 2:
            try:
                value = json.loads(item)
            except ValueError:
                continue
            if isinstance(value, str):
                out.setdefault(value.rstrip("\n"), no)
    return out
