"""envman.project.file: every refusal of a project file's values exactly (what, where, fix) and
what each accepted value becomes: environment, GPUs, shm sizes and the host's RAM, the project's
identity, walking up, ``project show --json``."""

from __future__ import annotations

import hashlib
import os

import pytest

from envman.project import file as F
from envman.project.file import GpuRequest, parse_environment, parse_gpus
from tests.support.errors import refusal

# --------------------------------------------------------------------------- environment, GPUs, shm

ENV_FIX = 'e.g. [environment] then WANDB_MODE = "offline"'


@pytest.mark.parametrize("value,expected", [
    ("X=1", ("key environment: expected a table of NAME = value, got a string (values are not shown: they may be secrets)", ENV_FIX)),
    ([1], ("key environment: expected a table of NAME = value, got a list (values are not shown: they may be secrets)", ENV_FIX)),
    ({"1X": "a"}, ("key environment.1X: expected a variable name (letters, digits, _), got '1X'", None)),
    ({"A\x1bB": "a"}, ("key environment: expected a variable name (letters, digits, _), got 'A\\x1bB'", None)),
    ({"X": [1]}, ("key environment.X: expected a string or a number, got a list (values are not shown: they may be secrets)", None)),
    ({"X": True}, ("key environment.X: expected a string or a number, got a boolean (values are not shown: they may be secrets)", None)),
    ({"X": None}, ("key environment.X: expected a string or a number, got no value (values are not shown: they may be secrets)", None)),
    ({"X": {"v": 1}}, ("key environment.X: expected a string or a number, got a table (values are not shown: they may be secrets)", None)),
] + [({"X": f"a{c}b"}, ("key environment.X: the value contains a NUL byte or a line break, which cannot be passed to a "
                        "container", "put multi-line data in a file in the project and read it")) for c in "\0\n\r"])
def test_every_environment_refusal_exactly(value, expected):
    assert refusal(lambda: parse_environment(value, where="W")) == (expected[0], "W", expected[1])


def test_environment_values_become_sorted_strings():
    assert parse_environment({"B": 1, "A": 1.5, "C": "x y"}, where="W") == (("A", "1.5"), ("B", "1"), ("C", "x y"))


@pytest.mark.parametrize("value", ["none", "NONE", " none ", "0", " 0 ", "", "   ", 0])
def test_every_spelling_of_no_gpu_is_none(value):
    assert parse_gpus(value, where="W") is None


@pytest.mark.parametrize("value", ["lots", -1, True, 1.5, [1], "device=", "device=0,", "device=0;x", "2x"])
def test_every_gpu_refusal_exactly(value):
    assert refusal(lambda: parse_gpus(value, where="W")) == (
        f'key gpus: expected "all", "none", a count or "device=0,2", got {value!r}', "W",
        'e.g. gpus = "all", gpus = 2 or gpus = "device=0,2"')


@pytest.mark.parametrize("request_,text,count", [
    (GpuRequest("all"), "all", 1), (GpuRequest("count", count=3), "3", 3),
    (GpuRequest("devices", devices=("0", "GPU-1")), "device=0,GPU-1", 2), (None, None, 0),
    (GpuRequest("count"), "None", 0)])
def test_each_gpu_request_kind_prints_and_counts(request_, text, count):
    if request_ is not None and (request_.kind != "count" or request_.count is not None):
        assert str(request_) == text and parse_gpus(text, where="W") == request_
    elif request_ is not None:
        assert str(request_) == text
    assert F.cluster_gpu_count(request_) == count


@pytest.mark.parametrize("text,n", [("1", 1), ("7b", 7), ("1k", 1024), ("1kb", 1024), ("1KiB", 1024), ("3m", 3 * 1024**2),
                                    ("2g", 2 * 1024**3), ("2gib", 2 * 1024**3), ("1t", 1024**4), (" 5M ", 5 * 1024**2)])
def test_every_size_unit_is_a_power_of_1024(text, n):
    assert F.shm_bytes(text) == n


@pytest.mark.parametrize("text", ["", "g", "-1", "1_000", "+5", "1x", "1.5g"])
def test_anything_else_is_not_a_size(text):
    with pytest.raises(ValueError):
        F.shm_bytes(text)


def _sysconf(pages: int, page: int):
    def sysconf(name: str) -> int:
        return {"SC_PHYS_PAGES": pages, "SC_PAGE_SIZE": page}[name]  # KeyError, like ValueError, for any other
    return sysconf


@pytest.mark.parametrize("pages,page,ram,shm", [(1024, 4096, 4 * 1024**2, "64m"), (1536 * 256, 4096, 1536 * 1024**2, "768m"),
                                                (4 * 1024**2, 4096, 16 * 1024**3, "8g"), (2 * 1024**2, 4096, 8 * 1024**3, "4g")])
def test_the_host_s_ram_is_pages_times_page_size_and_the_default_shm_follows(monkeypatch, pages, page, ram, shm):
    monkeypatch.setattr(F.os, "sysconf", _sysconf(pages, page))
    assert F.host_ram() == ram and F.default_shm_size() == shm


def test_a_host_that_cannot_say_its_ram_counts_as_16_gib(monkeypatch):
    def sysconf(name: str) -> int:
        raise ValueError(name)
    monkeypatch.setattr(F.os, "sysconf", sysconf)
    assert F.host_ram() == 16 * 1024**3 and F.default_shm_size() == "8g"


@pytest.mark.parametrize("ram,shm", [(0, "64m"), (2 * 1024**2, "64m"), (128 * 1024**2, "64m"), (130 * 1024**2, "65m")])
def test_the_default_shm_is_never_below_64_mib(ram, shm):
    assert F.default_shm_size(ram) == shm


# --------------------------------------------------------------------------- identity, walking up


def test_the_identity_is_the_name_and_12_hex_of_the_real_root(tmp_path):
    odd = tmp_path / os.fsdecode(b"caf\xe9")  # not UTF-8: a surrogate in the str
    odd.mkdir()
    link = tmp_path / "link"
    link.symlink_to(odd)
    for root in (odd, link):
        ident = F.project_identity("p", root)
        assert ident == "p-" + hashlib.sha256(os.fsencode(os.path.realpath(odd))).hexdigest()[:12]
    assert F.project_identity("p", tmp_path) != F.project_identity("p", odd)


def test_walking_up_starts_at_the_current_directory(tmp_path, monkeypatch):
    (tmp_path / "envman.toml").write_text('stack = "torch-2.4"\n')
    (tmp_path / "a" / "b").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "a" / "b")
    assert F.find_project_file() == tmp_path / "envman.toml"


def test_a_file_found_walking_up_that_is_not_yours_is_one_exact_refusal(tmp_path):
    f = tmp_path / "envman.toml"
    f.write_text('stack = "torch-2.4"\n')
    os.chmod(f, 0o666)
    (tmp_path / "sub").mkdir()
    assert refusal(lambda: F.find_project_file(tmp_path / "sub")) == (
        f"found walking up from {tmp_path / 'sub'}, but others can write it (group/world-writable); it was not used",
        str(f), f"read it, then name it explicitly and trust it (envman project trust {f}), "
                "or create your own envman.toml nearer")


# --------------------------------------------------------------------------- what `project show --json` prints


def test_project_json_has_every_field(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    root = tmp_path / "p"
    (root / "d").mkdir(parents=True)
    (root / "envman.toml").write_text(
        'name = "x"\nstack = "torch-2.4"\nrequirements = ["a==1", "b"]\napt = ["zlib1g", "curl"]\ncommand = "python t.py"\n'
        'gpus = "device=0,1"\nshm_size = "1g"\nmounts = ["./d:/d:ro", "./d:/e"]\nports = [8888, "1:2"]\n'
        'network = "project"\n[environment]\nK = "v"\n')
    assert F.load_project(root).to_json() == {
        "name": "x", "root": str(root), "file": str(root / "envman.toml"), "stack": "torch-2.4",
        "requirements": ["a==1", "b"], "requirements_file": None, "apt": ["curl", "zlib1g"],
        "command": ["python", "t.py"], "gpus": "device=0,1", "shm_size": "1g", "environment": ["K"],
        "mounts": [f"{root}/d:/d:ro", f"{root}/d:/e"], "ports": ["8888:8888", "1:2"], "network": "project",
        "needs_image": True}
    (root / "envman.toml").write_text('gpus = "none"\n')
    (root / "r.txt").write_text("a==1\n\n")
    shown = F.load_project(root).to_json()
    assert (shown["gpus"], shown["stack"], shown["needs_image"], shown["requirements"]) == ("none", None, False, [])
    (root / "envman.toml").write_text('requirements = "r.txt"\n')
    shown = F.load_project(root).to_json()
    assert (shown["gpus"], shown["requirements_file"], shown["requirements"], shown["needs_image"]) == (
        None, "r.txt", ["a==1"], True)


@pytest.mark.parametrize("key,value", [("apt", "ffmpeg"), ("apt", ["a", 1]), ("mounts", "/a:/b")])
def test_a_key_that_takes_a_list_of_strings_says_so_exactly(tmp_path, key, value):
    doc = {key: value}
    assert refusal(lambda: F.parse_project(doc, tmp_path / "envman.toml")) == (
        f"key {key}: expected a list of strings, got {value!r}", str(tmp_path / "envman.toml"), None)


# ---------------------------------------------------------------- exact refusals, by rule (mutation)

from envman.errors import UserError as _UserError  # noqa: E402
from envman.project import file as _file  # noqa: E402


@pytest.mark.parametrize("value, line", [
    (1, 'W: key network: expected "project" or "none", got a number'),
    (["none"], 'W: key network: expected "project" or "none", got a list'),
    ("host", "W: key network: 'host' is not a network envman attaches runs to — "
             "write network = \"project\" (the default: only this project's containers) or \"none\""),
    ("x" * 50, f"W: key network: {'x' * 40!r} is not a network envman attaches runs to — "
               "write network = \"project\" (the default: only this project's containers) or \"none\""),
])
def test_check_network_refuses_in_exactly_one_line(value, line):
    with pytest.raises(_UserError) as e:
        _file.check_network(value, where="W")
    assert e.value.line() == line


@pytest.mark.parametrize("value", ["project", "none"])
def test_check_network_takes_the_two_modes(value):
    assert _file.check_network(value, where="W") == value


def test_check_network_names_the_key_it_was_given():
    with pytest.raises(_UserError) as e:
        _file.check_network(2, where="cfg", key="run.network")
    assert e.value.line() == 'cfg: key run.network: expected "project" or "none", got a number'


@pytest.mark.parametrize("value", [True, False, 0, -1, "0", "0g", "", "8 g", "8x", "1" * 33, "0" * 32 + "1", "0" * 33, 1.5,
                                   None, ["8g"], "8g\n"])
def test_check_shm_refuses_what_is_no_positive_size_exactly(value):
    with pytest.raises(_UserError) as e:
        _file.check_shm(value, where="W")
    assert e.value.line() == f'W: key shm_size: expected a size such as "8g", "512m" or a number of bytes, got {value!r}'


@pytest.mark.parametrize("value", ["1", 1, "1b", "0" * 31 + "1", "1" + "0" * 9, "0001k"])
def test_check_shm_takes_the_smallest_size_and_32_characters(monkeypatch, value):
    monkeypatch.setattr(_file, "host_ram", lambda: 4 * 1024**3)
    assert _file.check_shm(value, where="W") == str(value).lower()


def test_check_shm_refuses_more_than_the_hosts_ram_exactly(monkeypatch):
    monkeypatch.setattr(_file, "host_ram", lambda: 4 * 1024**3)
    assert _file.check_shm("4g", where="W") == "4g"  # exactly the RAM: accepted
    assert _file.check_shm(4 * 1024**3, where="W") == str(4 * 1024**3)
    with pytest.raises(_UserError) as e:
        _file.check_shm(4 * 1024**3 + 1, where="W", key="run.shm_size")
    assert e.value.line() == (f"W: key run.shm_size: expected at most this host's RAM (4096 MiB), "
                              f"got {4 * 1024**3 + 1!r} — e.g. \"8g\"")


@pytest.mark.parametrize("value, got", [
    (0, Exception), (65536, Exception), (True, Exception), ("", Exception), ("80:", Exception), (":80", Exception),
    ("８０", Exception), ("+80", Exception), (" 80", Exception), ("80:80:80", Exception), (8.0, Exception),
    (1, (1, 1)), (65535, (65535, 65535)), ("8080:80", (8080, 80)), ("1:65535", (1, 65535)), ("443", (443, 443)),
])
def test_parse_port_bounds_and_forms(value, got):
    if got is Exception:
        with pytest.raises(_UserError) as e:
            _file.parse_port(value, where="W")
        assert e.value.line() == (f'W: key ports: expected ports 1-65535: 8888 or "HOST:CONTAINER" such as "8080:80", '
                                  f"got {value!r}")
    else:
        p = _file.parse_port(value, where="W")
        assert (p.host, p.container) == got


# every key's refusal by parse_project, as one exact line (file and fix included)
PARSE_REFUSALS = [
    ({'bogus': 1}, '/p/proj', '/p/proj/envman.toml: unknown key bogus — known keys: name, stack, requirements, apt, command, gpus, shm_size, environment, mounts, ports, network'),
    ({'name': 5}, '/p/proj', '/p/proj/envman.toml: key name: expected 1-63 lowercase letters, digits or ._- (starting with a letter or digit), got 5'),
    ({'name': 'Bad Name'}, '/p/proj', "/p/proj/envman.toml: key name: expected 1-63 lowercase letters, digits or ._- (starting with a letter or digit), got 'Bad Name'"),
    ({'stack': 3}, '/p/proj', '/p/proj/envman.toml: key stack: expected a stack name such as "torch-2.4-cuda12", got 3'),
    ({'requirements': 4}, '/p/proj', '/p/proj/envman.toml: key requirements: expected a requirements file relative to the project root, or a list of requirement strings, got 4'),
    ({'requirements': ['ok', 5]}, '/p/proj', "/p/proj/envman.toml: key requirements: expected a requirements file relative to the project root, or a list of requirement strings, got ['ok', 5]"),
    ({'requirements': ['a\nb']}, '/p/proj', "/p/proj/envman.toml: key requirements: expected one requirement per list item, got 'a\\nb'"),
    ({'apt': 'curl'}, '/p/proj', "/p/proj/envman.toml: key apt: expected a list of strings, got 'curl'"),
    ({'apt': ['curl', 2]}, '/p/proj', "/p/proj/envman.toml: key apt: expected a list of strings, got ['curl', 2]"),
    ({'apt': ['-oEvil']}, '/p/proj', "/p/proj/envman.toml: key apt: expected Debian package names (optionally name=version), got '-oEvil'"),
    ({'command': 3}, '/p/proj', '/p/proj/envman.toml: key command: expected the default command: a list of strings or one string (split like a shell), got 3'),
    ({'command': ['ok', 3]}, '/p/proj', "/p/proj/envman.toml: key command: expected the default command: a list of strings or one string (split like a shell), got ['ok', 3]"),
    ({'command': ''}, '/p/proj', "/p/proj/envman.toml: key command: expected a non-empty command, got ''"),
    ({'gpus': 'many'}, '/p/proj', '/p/proj/envman.toml: key gpus: expected "all", "none", a count or "device=0,2", got \'many\' — e.g. gpus = "all", gpus = 2 or gpus = "device=0,2"'),
    ({'gpus': True}, '/p/proj', '/p/proj/envman.toml: key gpus: expected "all", "none", a count or "device=0,2", got True — e.g. gpus = "all", gpus = 2 or gpus = "device=0,2"'),
    ({'shm_size': 'big'}, '/p/proj', '/p/proj/envman.toml: key shm_size: expected a size such as "8g", "512m" or a number of bytes, got \'big\''),
    ({'environment': ['A=1']}, '/p/proj', '/p/proj/envman.toml: key environment: expected a table of NAME = value, got a list (values are not shown: they may be secrets) — e.g. [environment] then WANDB_MODE = "offline"'),
    ({'environment': {'1A': 'x'}}, '/p/proj', "/p/proj/envman.toml: key environment.1A: expected a variable name (letters, digits, _), got '1A'"),
    ({'mounts': 'x'}, '/p/proj', "/p/proj/envman.toml: key mounts: expected a list of strings, got 'x'"),
    ({'mounts': [3]}, '/p/proj', '/p/proj/envman.toml: key mounts: expected a list of strings, got [3]'),
    ({'ports': '80'}, '/p/proj', '/p/proj/envman.toml: key ports: expected a list of ports (8888) or "HOST:CONTAINER" strings, published on 127.0.0.1, got \'80\''),
    ({'ports': [0]}, '/p/proj', '/p/proj/envman.toml: key ports: expected ports 1-65535: 8888 or "HOST:CONTAINER" such as "8080:80", got 0'),
    ({'command': ['a\0b']}, '/p/proj', "/p/proj/envman.toml: key command: expected words without NUL bytes, got ['a\\x00b']"),
    ({'command': ['ok', '\0']}, '/p/proj', "/p/proj/envman.toml: key command: expected words without NUL bytes, got ['ok', '\\x00']"),
    ({'command': 'a\0b'}, '/p/proj', "/p/proj/envman.toml: key command: expected words without NUL bytes, got 'a\\x00b'"),
    ({'command': 'echo "unclosed'}, '/p/proj', '/p/proj/envman.toml: key command: expected a shell-like command line (No closing quotation), got \'echo "unclosed\''),
    ({}, '/p/日本', "/p/日本/envman.toml: the directory name '日本' makes no valid project name — add name = \"my-project\" to the file"),
    ({}, '/p/___', "/p/___/envman.toml: the directory name '___' makes no valid project name — add name = \"my-project\" to the file"),
    ({'mounts': ['x'] * 257}, '/p/proj', '/p/proj/envman.toml: key mounts: 257 mounts, more than 256 — mount a parent folder once instead of its parts'),
    ({'requirements': 'reqs.txt'}, '/p/proj', "/p/proj/envman.toml: key requirements: file 'reqs.txt' not found under /p/proj — give a path relative to the project root, or a list of requirements"),
    ({'mounts': ['/etc:/e:ro']}, '/p/proj', "/p/proj/envman.toml: key mounts: '/etc:/e:ro' is refused: /etc is a host system directory (/etc) — no file may mount it, trusted or not; if you really mean it, pass it yourself: envman run --mount SOURCE:TARGET --allow-dangerous-mount"),
    ({'ports': list(range(1, 258))}, '/p/proj', '/p/proj/envman.toml: key ports: 257 ports, more than 256 — publish the ports the project serves; others reach them over its network'),
    ({'network': 'host'}, '/p/proj', '/p/proj/envman.toml: key network: \'host\' is not a network envman attaches runs to — write network = "project" (the default: only this project\'s containers) or "none"'),
]


@pytest.mark.parametrize("doc, root, line", PARSE_REFUSALS, ids=[f"p{i}" for i in range(len(PARSE_REFUSALS))])
def test_parse_project_refuses_each_key_in_exactly_one_line(doc, root, line):
    from pathlib import Path as _Path

    with pytest.raises(_UserError) as e:
        _file.parse_project(doc, _Path(root) / "envman.toml")
    assert e.value.line() == line and "\n" not in line


@pytest.mark.parametrize("source", ["reqs.txt", "deps/requirements.txt"])
def test_a_requirements_file_s_refusal_names_the_file_it_came_from(tmp_path, source):
    from envman.project.file import MAX_MOUNTS

    root = tmp_path / "proj"
    (root / source).parent.mkdir(parents=True)
    (root / source).write_text("numpy\n-r other.txt\n")
    with pytest.raises(_UserError) as e:
        _file.parse_project({"requirements": source}, root / "envman.toml")
    assert e.value.where == f"{root / 'envman.toml'}: requirements ({source})"
    with pytest.raises(_UserError) as e:
        _file.parse_project({"requirements": ["numpy", "-r other.txt"]}, root / "envman.toml")
    assert e.value.where == f"{root / 'envman.toml'}: requirements"
    assert _file.parse_project({"mounts": ["./a:/a"] * MAX_MOUNTS}, root / "envman.toml").name == "proj"  # the limit itself


@pytest.mark.parametrize("value", [1, None, True, ["/a:/b"], {"a": "b"}, b"/a:/b"])
def test_a_mount_that_is_not_a_string_is_refused_whole(value):
    from envman.project.file import parse_mount

    with pytest.raises(_UserError) as e:
        parse_mount(value, base=None, where="W", key="run.mounts")
    assert e.value.line() == f'W: key run.mounts: expected "SOURCE:TARGET[:ro]", got {value!r}'


def test_a_mount_from_a_file_is_the_default_and_its_refusal_says_no_file_may_ask():
    from envman.project.file import parse_mount

    with pytest.raises(_UserError) as e:
        parse_mount("/etc:/e", base=None, where="W", key="run.mounts")
    assert e.value.fix.startswith("no file may mount it, trusted or not")
    with pytest.raises(_UserError) as e:
        parse_mount("/etc:/e", base=None, where="--mount", key="--mount", from_file=False)
    assert e.value.fix == "add --allow-dangerous-mount if you really mean to give the container this path"


def test_256_ports_are_the_most_a_file_may_publish(tmp_path):
    from envman.project.file import MAX_PORTS

    assert len(_file.parse_project({"ports": list(range(1, MAX_PORTS + 1))}, tmp_path / "envman.toml").ports) == MAX_PORTS


@pytest.mark.parametrize(("call", "line"), [
    (lambda: _file.parse_port("0", where="--port", key="--port"),
     '--port: expected ports 1-65535: 8888 or "HOST:CONTAINER" such as "8080:80", got \'0\''),
    (lambda: _file.check_shm("big", where="--shm-size", key="--shm-size"),
     '--shm-size: expected a size such as "8g", "512m" or a number of bytes, got \'big\''),
    (lambda: _file.parse_port("0", where="W", key="run.ports"),
     'W: key run.ports: expected ports 1-65535: 8888 or "HOST:CONTAINER" such as "8080:80", got \'0\''),
])
def test_an_option_refused_on_the_command_line_is_named_once(call, line):
    with pytest.raises(_UserError) as e:
        call()
    assert e.value.line().startswith(line)
