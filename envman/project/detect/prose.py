"""What a README, an INSTALL file or an installation page says, the weakest evidence.

Two kinds of statement: install commands in code (``pip install torch==1.7.1``, ``conda install
pytorch=1.7.1 cudatoolkit=11.0 -c pytorch``, ``conda create -n env python=3.7``), read as the
commands they are; and sentences (``tested with PyTorch 1.0 and CUDA 10.0``, ``Python 3.6+``,
``TensorFlow >= 1.14``, ``will not work with PyTorch 1.0``), read with a small grammar: a name,
a version, and the words around them that make it a floor, a ceiling or an exclusion. A code
block's line that is one bare pin of a framework (``torch==0.2.0.post3`` under "Requirements")
is read as such a sentence. What is said of another version of the code ("an earlier version of
the codebase", "the old code") is not read, to the end of its paragraph.
"""

from __future__ import annotations

import posixpath
import re
from itertools import islice

from envman.project.detect.facts import COMMAND, CUDA, CUDNN, FRAMEWORK, PROSE, PYTHON, UNSUPPORTED, Fact, Statement, clip_text
from envman.project.detect.images import command_facts, image_facts
from envman.project.detect.pins import OWN_RELEASES, cuda_of_tag, requirement_facts
from envman.project.detect.repo import PROSE_LIMIT, Repository

#: Names in prose → what they name.
_NAMES = [
    (r"py-?torch", "torch"),
    (r"torch(?!\s*7)(?=\s*(?:version\s*)?(?:[=><≥≤~^v]|[0-9]))", "torch"),  # "torch 1.7", not "Torch7" or "torch.nn"
    (r"tensor-?flow(?:-gpu)?", "tensorflow"),
    (r"jax(?:lib)?", "jax"),
    (r"onnx-?runtime(?:-gpu)?", "onnxruntime"),
    (r"cuda(?:\s*toolkit)?", "cuda"),
    (r"cudnn", "cudnn"),
    (r"python", "python"),
]
_VERSION = r"v?([0-9]{1,4}\.x|[0-9]{1,4}(?:\.[0-9]{1,6}){0,2})(?![0-9A-Za-z])"
_OP = r"(>=|=>|≥|<=|=<|≤|==|=|>|<|~=|\^)?"
_PHRASE_RE = re.compile(
    # a name starts a word; after a slash only when a version or its bracket ends the word before
    # ("PyTorch (0.3.1)/CUDA 8.0"), so a path (/usr/local/cuda 10) names nothing
    r"(?:(?<![A-Za-z0-9_./-])|(?<=[0-9)]/))(" + "|".join(n for n, _ in _NAMES) + r")"
    r"(?:[ :,(]{0,3}(?:version|ver\.?|v) ?)?[ :,|(]{0,6}" + _OP + r" ?" + _VERSION
    + r"( ?\(? ?(?:\+(?![A-Za-z0-9])|or (?:higher|later|newer|above|greater)|and (?:above|higher|later|newer)|or (?:lower|earlier|below|older)"
      r"|and (?:below|lower|earlier|older)|及?以上|及?以下))?",
    re.IGNORECASE,
)
_FLOOR_BEFORE = re.compile(r"(at\s+least|minimum|newer\s+than|later\s+than|higher\s+than|above)\s*$", re.IGNORECASE)
_CEIL_BEFORE = re.compile(r"(at\s+most|up\s+to|older\s+than|lower\s+than|below|before)\s*$", re.IGNORECASE)
_NOT_BEFORE = re.compile(r"(not|n't|never|no\s+longer|incompatible|fails?|breaks?|deprecat\w*|dropp\w*|removing)\b[^.;]{0,60}$",
                         re.IGNORECASE)
#: A release spoken of as elsewhere or to come, not as this code's: "we hope to support TensorFlow
#: 2.0", "for TensorFlow 2.0 support, please use the tf2 branch".
_ELSEWHERE_BEFORE = re.compile(r"\b(?:hope|plan|plans|planning|intend|going|aim)\s+to\s+(?:support|add|port|move)\b[^.;]{0,40}$"
                               r"|\b(?:will|soon)\s+(?:support|add)\b[^.;]{0,40}$", re.IGNORECASE)
_ELSEWHERE_AFTER = re.compile(r"[^.;]{0,40}\b(?:branch|fork|(?:use|using|check\s*out|checkout|switch\s+to|go\s+back\s+to)\s+"
                             r"(?:an?\s+|the\s+)?(?:older|earlier|previous|prior)\s+(?:commit|version|release|tag|revision)s?)\b",
                             re.IGNORECASE)
#: What introduces a release that an ``_ELSEWHERE_AFTER`` place serves: "for TensorFlow 1.x, use
#: the tf1 branch", "to run on PyTorch 0.3, use an older commit".
_ELSEWHERE_FOR = re.compile(r"\b(?:for|(?:run|use|running|using|work)\s+(?:on|with|it\s+(?:on|with)))\s*$", re.IGNORECASE)
_NOT_AFTER = re.compile(r"[^.;]{0,30}\b(no\s+longer|not|n't|deprecated|dropped|unsupported|removed)\b", re.IGNORECASE)
#: Names of frameworks no stack serves, in prose.
_UNSUPPORTED_RE = re.compile(
    r"(?<![A-Za-z0-9_])(caffe2?|theano|mxnet|torch\s*7|lua\s*torch|luarocks|chainer|cntk|paddlepaddle|mindspore|megengine|jittor|oneflow|python\s*2\.[67](?![0-9]))(?![A-Za-z0-9_])",
    re.IGNORECASE,
)
_UNSUPPORTED_KEYS = {"caffe": "caffe", "caffe2": "caffe2", "theano": "theano", "mxnet": "mxnet", "chainer": "chainer",
                     "cntk": "cntk", "paddlepaddle": "paddle", "mindspore": "mindspore", "megengine": "megengine",
                     "jittor": "jittor", "oneflow": "oneflow"}


def _spec(op: str | None, version: str, suffix: str | None, before: str) -> str:
    version = version.lower()
    if version.endswith(".x"):
        version, wild = version[:-2], True
    else:
        wild = version.count(".") < 2
    suffix = (suffix or "").lower()
    floor_words = any(w in suffix for w in ("+", "higher", "later", "newer", "above", "greater", "以上"))
    if _NOT_BEFORE.search(before):
        if floor_words:  # "does not work with PyTorch 1.5 or later": below it
            return f"<{version}"
        return f"!={version}.*" if wild else f"!={version}"
    if op in (">=", "=>", "≥", ">", "^") or floor_words \
            or _FLOOR_BEFORE.search(before):
        return f">={version}"
    if op in ("<=", "=<", "≤") or any(w in suffix for w in ("lower", "earlier", "below", "older", "以下")):
        return f"<={version}" if not wild else f"<{_next(version)}"
    if op == "<" or _CEIL_BEFORE.search(before):
        return f"<{version}"
    if op == "~=":
        return f"~={version}" if "." in version else f"=={version}.*"
    return f"=={version}.*" if wild else f"=={version}"


#: "tested on 1.8.1", "tested with v1.10": a release named without its framework's name.
_TESTED_RE = re.compile(r"\btested (?:on|with|using) v?([0-9]{1,4}\.[0-9]{1,6}(?:\.[0-9]{1,6})?)(?![0-9])", re.IGNORECASE)


def _is_pin(spec: str) -> bool:
    return spec.startswith("==")


def _next(version: str) -> str:
    parts = [int(p) for p in version.split(".")]
    parts[-1] += 1
    return ".".join(str(p) for p in parts)


def _plain(line: str) -> str:
    """A line of Markdown or reStructuredText as a sentence: links and images as their text,
    emphasis and code marks dropped (``[PyTorch](https://pytorch.org/) 1.10.1`` → ``PyTorch 1.10.1``; an
    address may hold one pair of brackets: ``[PyTorch]((http://pytorch.org/)) v1.0``)."""
    line = re.sub(r"!?\[([^\]]{0,200})\]\([^()]{0,500}(?:\([^()]{0,500}\)[^()]{0,500})?\)", r"\1", line)
    line = re.sub(r"`([^`]{0,300})`_?", r"\1", line)
    return line.replace("**", "").replace("*", "")


#: A range of Pythons or releases written with a dash or "to": ``Python 3.8-3.11``.
_RANGE_RE = re.compile(r"^ ?(?:-|–|—|to) ?v?([0-9]{1,4}\.[0-9]{1,6})(?![0-9])")


def sentence_facts(line: str) -> list[tuple[str, Fact]]:
    """(the phrase, its fact) of each stack statement in one line of prose."""
    out: list[tuple[str, Fact]] = []
    # one space for any run of blanks, and a bounded line: every pattern below then matches in
    # time linear in the line (runs of blanks between optional parts backtrack otherwise)
    line = _plain(re.sub(r"\s+", " ", line)[:2000])
    for m in _PHRASE_RE.finditer(line):
        word, op, version, suffix = m.group(1), m.group(2), m.group(3), m.group(4)
        what = next(kind for pat, kind in _NAMES if re.fullmatch(pat, word, re.IGNORECASE)
                    or (kind == "torch" and word.lower() == "torch"))
        before = line[max(0, m.start() - 80): m.start()]
        phrase = m.group(0).strip()
        if _ELSEWHERE_BEFORE.search(before) or (_ELSEWHERE_AFTER.match(line, m.end()) and _ELSEWHERE_FOR.search(before)):
            continue
        upto = _RANGE_RE.match(line[m.end():]) if not op and not suffix else None
        if upto and what in ("python", "torch", "tensorflow", "jax", "onnxruntime"):
            high = upto.group(1)
            spec = f">={version},<{_next(high)}"
            fact = Fact(PYTHON, spec=spec) if what == "python" else Fact(FRAMEWORK, framework=what, spec=spec)
            if what != "python" or version.startswith("3."):
                out.append((phrase + line[m.end():m.end() + upto.end()], fact))
            continue
        if what == "cuda":
            floor = op in (">=", "=>", "≥", ">") or bool(suffix and re.search(r"\+|higher|later|newer|above|greater", suffix)) \
                or bool(_FLOOR_BEFORE.search(before))
            if re.fullmatch(r"[0-9]+(\.[0-9]+)?(\.[0-9]+)?", version) and 7 <= int(version.split(".")[0]) <= 13 \
                    and not _NOT_BEFORE.search(before) and not (suffix and not floor):
                out.append((phrase, Fact(CUDA, version=".".join(version.split(".")[:2]), spec=">=" if floor else "")))
        elif what == "cudnn":
            out.append((phrase, Fact(CUDNN, version=version)))
        elif what == "python":
            major = version.split(".")[0]
            after = line[m.end(): m.end() + 60]
            if major == "2" and not _NOT_BEFORE.search(before) and not _NOT_AFTER.match(after) \
                    and op not in (">=", ">", "≥") and not suffix:
                out.append((phrase, Fact(UNSUPPORTED, framework="python 2")))
            elif major == "3" and "." in version:
                out.append((phrase, Fact(PYTHON, spec=_spec(op, version, suffix, before))))
        else:
            if "." not in version and not version.endswith("x"):
                continue  # "PyTorch 2" alone is too loose to be a version ("pytorch 2 times faster")
            gpu = True if word.lower().endswith("-gpu") else None
            local = re.match(r"\+(cu(?:da)?[0-9]{2,3}|cpu)\b", line[m.end():])
            spec = _spec(op, version, suffix, before)
            if word.lower() in OWN_RELEASES:
                # jaxlib's releases are its own (jax 0.2.5 with jaxlib 0.1.56): an exact one names the jax
                # releases of the rows that install it, anything else only the framework; ``+cuda110`` its CUDA
                exact = _is_pin(spec) and not spec.endswith("*") and re.fullmatch(r"[0-9.]+", version)
                out.append((phrase, Fact(FRAMEWORK, framework=what, spec="",
                                         companion=f"{word.lower()}=={version}" if exact else None)))
                if local and local.group(1).lower() != "cpu":
                    out.append((phrase + local.group(0), Fact(CUDA, version=cuda_of_tag(local.group(1)))))
                continue
            denied = _NOT_AFTER.match(line, m.end(), m.end() + 60)
            if not op and not suffix and spec.startswith("==") and denied \
                    and not re.search(r"[0-9]", denied.group(0) + re.split(r"[.;]", line[denied.end():], maxsplit=1)[0]):
                spec = "!" + spec[1:]  # "support for PyTorch 1.4 was dropped", not "1.4 (does not support 1.5)"
            out.append((phrase, Fact(FRAMEWORK, framework=what, spec=spec, gpu=gpu)))
            if local and what == "torch":
                out.append((phrase + local.group(0), Fact(CUDA, version=cuda_of_tag(local.group(1)))))
    tested = _TESTED_RE.search(line)
    if tested and out and out[-1][1].kind == FRAMEWORK and not _is_pin(out[-1][1].spec) \
            and not out[-1][0].lower().startswith(tuple(OWN_RELEASES)):  # a jaxlib release is no jax release
        # "PyTorch >= 1.7.0 (tested on 1.8.1)": the release the authors ran, inside their range
        last = out[-1][1]
        out.append((tested.group(0), Fact(FRAMEWORK, framework=last.framework, spec=_spec(None, tested.group(1), None, ""),
                                          gpu=last.gpu)))
    for m in _UNSUPPORTED_RE.finditer(line):
        word = re.sub(r"\s+", " ", m.group(1).lower())
        if word.startswith("python"):
            continue  # read above, with its version's context
        key = _UNSUPPORTED_KEYS.get(word, "lua torch")
        out.append((m.group(1), Fact(UNSUPPORTED, framework=key)))
    return out


#: Images whose names carry a stack, as ``docker run``/``docker pull``/``FROM`` lines name them.
_IMAGE_RE = re.compile(r"(?<![A-Za-z0-9./_-])((?:nvcr\.io/nvidia/[a-z0-9._-]+|(?:docker\.io/)?(?:nvidia/cuda|pytorch/pytorch|"
                       r"tensorflow/tensorflow)):[A-Za-z0-9][A-Za-z0-9._-]{0,80})")


#: Words that turn what follows, to the end of the paragraph, to another version of the code:
#: "If you need to use an earlier version of the codebase, ... PyTorch 0.1.12 ... `conda install
#: pytorch=0.1.12`", "For the old code:". Not "the older version of PyTorch" (a framework's).
_OTHER_CODE_RE = re.compile(
    r"\b(?:earlier|older|previous|prior|original|old|legacy)\s+(?:version|release|revision|commit|branch|tag)s?\s+"
    r"of\s+(?:the|this|our)\s+(?:code(?:base)?|repo(?:sitory)?|project|implementation)\b"
    r"|\b(?:the|our)\s+(?:old|older|original|previous|earlier|legacy)\s+code(?:base)?\b",
    re.IGNORECASE,
)
_HEADING_RE = re.compile(r"#{1,6}\s|=+\s*$|-+\s*$")


#: A line that is one pip requirement with a version (``torch==0.2.0.post3``, ``tensorflow-gpu>=1.4,<1.5``),
#: as a README lists pins in a code block; a bare name or a sentence is not one.
_REQUIREMENT_LINE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,80}(?:\[[A-Za-z0-9_,. -]{0,80}\])? ?"
                                  r"(?:===|==|>=|<=|~=|!=|<|>) ?[0-9][0-9A-Za-z.*+!_-]{0,40}"
                                  r"(?: ?, ?(?:===|==|>=|<=|~=|!=|<|>) ?[0-9][0-9A-Za-z.*+!_-]{0,40}){0,4}")


#: A Markdown code fence: a run of backticks whose info string holds no backtick (a line
#: ```` ```conda create -n x python=3.8``` ```` is a code span, read as inline code), or of tildes.
_FENCE_RE = re.compile(r"`{3,}[^`]*$|~~~")


#: A Markdown or reStructuredText list item's marker: ``- ``, ``* ``, ``+ ``, ``1. ``, ``2) ``.
_LIST_ITEM_RE = re.compile(r"(?:[-*+]|\d{1,3}[.)])\s+")


#: A name and its version joined by a comparison (``PyTorch == 0.3.1``, ``python>=3.6``): in a code
#: block that installs nothing, a statement of what the code needs.
_STATED_RE = re.compile(r"[A-Za-z] ?(?:==|>=|<=|~=|≥|≤) ?v?[0-9]")


#: An option that names a file to install from (``-f environment.yml``, ``-r requirements/gpu.txt``,
#: ``--file spec.txt``), and the install commands that take one: ``conda env create``, ``pip install``.
_FILE_OPTION_RE = re.compile(r"\s(?:-f|--file|-r|--requirement)[ =]['\"]?([A-Za-z0-9_./-]{1,200})")
_INSTALLS_FROM_RE = re.compile(r"\b(?:(?:conda|mamba|micromamba)\s+(?:env\s+)?(?:create|update|install)|pip[0-9.]*\s+install)\b")
#: Options looked at per file: a file of one option repeated costs no more than a real one.
_MAX_FILE_OPTIONS = 500
#: An install of the project itself (``pip install -e .``, ``uv pip install ".[cuda]"``, ``uv
#: sync``, ``poetry install``): it names the project's own manifests.
_INSTALLS_ITSELF_RE = re.compile(
    r"\b(?:(?:uv\s+)?pip[0-9.]*\s+install(?:\s+(?:-e|--editable|-U|--upgrade|--user|--no-deps))*\s+['\"]?\.(?:\[[A-Za-z0-9_,.-]{0,200}\])?['\"]?(?=\s|$)"
    r"|uv\s+sync\b|poetry\s+install\b)")
_MANIFESTS = ("pyproject.toml", "setup.py", "setup.cfg")


def named_files(repo: Repository, rel: str) -> set[str]:
    """The repository's files that a README's install commands name (``-f`` of ``conda env
    create``, ``-r`` of ``pip install``; the project's own ``pyproject.toml``, ``setup.py`` and
    ``setup.cfg`` for ``pip install .``, ``uv sync`` or ``poetry install``), as paths from the
    root: from the README's folder, else from the root."""
    text = repo.read(rel, limit=PROSE_LIMIT)
    if text is None:
        return set()
    here = posixpath.dirname(rel)
    files = repo.file_set
    out: set[str] = set()
    for m in islice(_FILE_OPTION_RE.finditer(text), _MAX_FILE_OPTIONS):
        # the command the option belongs to: the words before it, back to the last separator
        command = re.split(r"[;&|\n]", text[max(0, m.start() - 300): m.start()])[-1]
        if not _INSTALLS_FROM_RE.search(command):
            continue
        for base in (here, ""):
            path = posixpath.normpath(posixpath.join(base, m.group(1)))
            if path in files:
                out.add(path)
                break
    if any(True for _ in islice(_INSTALLS_ITSELF_RE.finditer(text), 1)):
        for base in dict.fromkeys((here, "")):
            own = {posixpath.normpath(posixpath.join(base, name)) for name in _MANIFESTS} & files
            if own:
                out |= own
                break
    return out


def read_prose(repo: Repository, rel: str, matrix: object = None) -> list[Statement]:
    """The statements of a README-like file (Markdown or reStructuredText or plain text)."""
    text = repo.read(rel, limit=PROSE_LIMIT)
    if text is None:
        return []
    out: list[Statement] = []
    in_code = False
    other_code = False  # from a mention of another version of the code to the paragraph's end
    introduces = False  # the last line of text ended with ":", so what follows belongs to it
    for no, line in enumerate(text.splitlines()[:5000], 1):
        stripped = line.strip()
        if _FENCE_RE.match(stripped):
            in_code = not in_code
            introduces = introduces and in_code  # a closed block was what the line before introduced
            continue
        if not in_code and not introduces and (not stripped or _HEADING_RE.match(stripped) or _LIST_ITEM_RE.match(stripped)):
            other_code = False  # a paragraph, a heading or a list item of its own
        if not stripped:
            continue
        if not in_code:
            introduces = stripped.endswith(":")
        if other_code:
            continue
        if not in_code and (mark := _OTHER_CODE_RE.search(stripped[:2000])):
            other_code = True
            # the sentence that names the other version and the rest of the paragraph say nothing
            # of this code; what comes before that sentence on the line still does
            start = max(stripped.rfind(c, 0, mark.start()) for c in ".;!?")
            if start < 0:
                continue
            line = stripped = stripped[:start + 1]
        item = _LIST_ITEM_RE.match(stripped)
        if item and line.startswith(("    ", "\t")):
            stripped = stripped[item.end():]  # an item of a nested Markdown list is text, not an indented code block
        code = in_code or (not item and line.startswith(("    ", "\t"))) or stripped.startswith(("$ ", "> pip", ">>> "))
        comment = re.match(r"#(?![!#])\s*(.+)", stripped) if code else None
        if comment:  # a shell comment in a code block is a sentence ("# the wheel for CUDA 11"), never a command
            for phrase, fact in sentence_facts(comment.group(1)):
                out.append(Statement(rel, no, clip_text(line), "readme", PROSE, fact, notes=(phrase,)))
            continue
        inline = re.findall(r"`([^`]{3,300})`", line)
        commands = [stripped.lstrip("$> ")] if code else [c for c in inline if re.search(r"\b(pip|conda|mamba)\b", c)]
        found_command = False
        for command in commands:
            for word, fact in command_facts(command):
                out.append(Statement(rel, no, clip_text(line), "readme", COMMAND, fact, notes=(word,)))
                found_command = True
            for ref in _IMAGE_RE.findall(command):
                facts, what = image_facts(ref, matrix)  # type: ignore[arg-type]
                out += [Statement(rel, no, clip_text(line), "readme", COMMAND, f, notes=(what,)) for f in facts]
                found_command = found_command or bool(facts)
        if code:
            if not found_command and _REQUIREMENT_LINE_RE.fullmatch(stripped):
                # a README's list of pins in a code block ("torch==0.2.0.post3" under
                # "Requirements"): a README statement, as the sentence "PyTorch 0.2.0" is
                for fact in requirement_facts(stripped):
                    if fact.kind == FRAMEWORK:
                        out.append(Statement(rel, no, clip_text(line), "readme", PROSE, fact, notes=(stripped,)))
            elif not found_command and _STATED_RE.search(stripped):
                # a block that lists what the code needs ("Python >= 3.5.5, PyTorch == 0.3.1") is no
                # command: its statements that carry their own comparison speak as a sentence
                for phrase, fact in sentence_facts(stripped):
                    if _STATED_RE.search(phrase):
                        out.append(Statement(rel, no, clip_text(line), "readme", PROSE, fact, notes=(phrase,)))
            continue
        # around an install command, the words outside it still speak ("PyTorch 0.4: `conda install pytorch`")
        for phrase, fact in sentence_facts(re.sub(r"`[^`]*`", " ", line) if found_command else line):
            out.append(Statement(rel, no, clip_text(line), "readme", PROSE, fact, notes=(phrase,)))
    return out
