"""The stack-name grammar: case, whitespace, every alias, every part, and malformed forms."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from envman.errors import ResolveError
from envman.stack.names import ALIASES, FLAVOURS, PLATFORM_WORDS, parse_name

ALIAS_NAMES = sorted(ALIASES)


@pytest.mark.parametrize("alias, framework", sorted(ALIASES.items()))
def test_every_alias(alias, framework):
    q = parse_name(f"{alias}-1.2")
    assert (q.framework, q.version, q.cuda, q.cpu, q.python, q.flavour) == (framework, "1.2", None, False, None, None)


def test_alias_table():
    assert ALIASES == {
        "torch": "torch", "pytorch": "torch", "tensorflow": "tensorflow", "tf": "tensorflow", "jax": "jax",
        "onnxruntime-gpu": "onnxruntime", "onnxruntime": "onnxruntime", "ort": "onnxruntime",
    }


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_every_flavour(flavour):
    assert parse_name(f"torch-2.4-cuda12-{flavour}").flavour == flavour
    assert parse_name(f"torch-2.4-{flavour}").flavour == flavour


@pytest.mark.parametrize(
    "text, cuda",
    [("torch-2.4-cuda12", "12"), ("torch-2.4-cuda12.4", "12.4"), ("torch-2.4-cu124", "12.4"),
     ("torch-2.4-cu118", "11.8"), ("torch-2.4-cu92", "9.2"), ("torch-2.4-cu100", "10.0"),
     ("torch-2.4-cuda9", "9"), ("torch-2.4-cu130", "13.0")],
)
def test_cuda_forms(text, cuda):
    q = parse_name(text)
    assert q.cuda == cuda and not q.cpu


@pytest.mark.parametrize(
    "text, fields",
    [
        ("TORCH-2.4-CUDA12", ("torch", "2.4", "12", False, None, None)),
        ("  torch-2.4-cpu  ", ("torch", "2.4", None, True, None, None)),
        ("\ttf-2.15-py3.11\n", ("tensorflow", "2.15", None, False, "3.11", None)),
        ("Ort-1.20.1-Cu124-PY3.10-Cudnn-Runtime", ("onnxruntime", "1.20.1", "12.4", False, "3.10", "cudnn-runtime")),
        ("PyTorch-1.0-cuda10-py3.6-devel", ("torch", "1.0", "10", False, "3.6", "devel")),
        ("jax-0.4.30-cuda12-py3.12", ("jax", "0.4.30", "12", False, "3.12", None)),
        ("onnxruntime-gpu-1.18", ("onnxruntime", "1.18", None, False, None, None)),
    ],
)
def test_case_and_whitespace_are_ignored(text, fields):
    q = parse_name(text)
    assert (q.framework, q.version, q.cuda, q.cpu, q.python, q.flavour) == fields
    assert q.text == text  # the user's text is kept for messages


@pytest.mark.parametrize(
    "text",
    [
        "", " ", "torch", "torch-", "-2.4", "torch2.4", "torch-2.4-", "torch-x", "torch-2.4.1.0.0",
        "torch-2..4", "torch-.4", "torch-2.4-cu1180", "torch-2.4-cu1", "torch-2.4-cuda", "torch-2.4-cu",
        "torch-2.4-cuda12.4.1", "torch-2.4-cuda12.", "torch-2.4-py3.123", "torch-2.4-py3", "torch-2.4-py",
        "torch-2.4-py3.", "torch-2.4-py10.1", "torch-2.4-cpu-cuda12", "torch-2.4-cuda12-cpu", "torch-2.4-gpu",
        "torch-2.4-cudnn", "torch-2.4-cuda12-slim", "torch-2.4-py3.10-cuda12", "torch-2.4-devel-py3.10",
        "torch-2.4-cuda12-devel-devel", "torch 2.4", "torch_2.4", "torch-2.4 cuda12", "mxnet-1.9",
        "torch-2.4\n-cpu", "torch-2.4\x00", "torch-2.4-cuda12-py3.10-", "torch--2.4", "onnxruntime-gpu",
        "tensorflow-gpu-2.4", "torch-2.4-cuda-12",
    ],
)
def test_malformed_names_are_refused_with_the_grammar(text):
    with pytest.raises(ResolveError) as e:
        parse_name(text)
    line = e.value.line()
    assert "cannot parse stack name" in line and "<framework>-<version>" in line
    assert "\n" not in line


def test_long_names_are_refused_quickly():
    import time

    t0 = time.perf_counter()
    for text in ("torch-" + "1." * 5000 + "1", "torch-2.4-" + "cuda12-" * 2000, "x" * 10000):
        with pytest.raises(ResolveError):
            parse_name(text)
    assert time.perf_counter() - t0 < 1.0


# --- properties ---------------------------------------------------------------------------------

part = st.integers(0, 99).map(str)
version = st.lists(part, min_size=1, max_size=4).map(".".join)
target = st.one_of(
    st.just(("", None, False)),
    st.just(("-cpu", None, True)),
    st.tuples(st.integers(1, 99), st.one_of(st.none(), st.integers(0, 9))).map(
        lambda t: (f"-cuda{t[0]}" + (f".{t[1]}" if t[1] is not None else ""),
                   f"{t[0]}" + (f".{t[1]}" if t[1] is not None else ""), False)),
    st.tuples(st.integers(1, 99), st.integers(0, 9)).map(lambda t: (f"-cu{t[0]}{t[1]}", f"{t[0]}.{t[1]}", False)),
)
python = st.one_of(st.just(("", None)), st.tuples(st.integers(2, 9), st.integers(0, 99)).map(
    lambda t: (f"-py{t[0]}.{t[1]}", f"{t[0]}.{t[1]}")))
flavour = st.one_of(st.just(("", None)), st.sampled_from(FLAVOURS).map(lambda f: (f"-{f}", f)))
alias = st.sampled_from(ALIAS_NAMES)
platform = st.one_of(st.just(("", None)), st.sampled_from(sorted(PLATFORM_WORDS)).map(lambda w: (f"-{w}", PLATFORM_WORDS[w])))
case = st.sampled_from([str.lower, str.upper, str.title, lambda s: s])
space = st.sampled_from(["", " ", "  ", "\t", "\n"])


@given(alias, version, target, python, flavour, platform, case, space, space)
def test_every_well_formed_name_parses_to_its_parts(a, v, t, p, f, pl, c, lead, trail):
    text = lead + c(f"{a}-{v}{t[0]}{p[0]}{f[0]}{pl[0]}") + trail
    q = parse_name(text)
    assert q.framework == ALIASES[a]
    assert q.version == v
    assert (q.cuda, q.cpu) == (t[1], t[2])
    assert q.python == p[1]
    assert q.flavour == f[1]
    assert q.platform == pl[1]


@pytest.mark.parametrize("text, platform", [("torch-2.4-arm64", "linux/arm64"), ("torch-2.4-cuda12-aarch64", "linux/arm64"),
                                            ("torch-2.4-cu128-py3.12-devel-ARM64", "linux/arm64"),
                                            ("torch-2.4-amd64", "linux/amd64"), ("torch-2.4-x86_64", "linux/amd64"), ("torch-2.4", None)])
def test_platform_part(text, platform):
    assert parse_name(text).platform == platform


@pytest.mark.parametrize("text", ["torch-2.4-arm64-cuda12", "torch-2.4-arm", "torch-2.4-x86", "torch-2.4-arm64-arm64",
                                  "torch-2.4-linux/arm64", "torch-2.4-arm64-devel"])
def test_platform_in_the_wrong_place_or_unknown(text):
    with pytest.raises(ResolveError):
        parse_name(text)


@given(alias, version, st.sampled_from(["-cu1180", "-cuda12.4.1", "-py3.123", "-py3", "-cu1", "-gpu", "-", "--cpu"]))
def test_over_long_and_broken_parts_never_parse(a, v, bad):
    with pytest.raises(ResolveError):
        parse_name(f"{a}-{v}{bad}")


@given(st.text(max_size=60))
def test_any_text_parses_or_fails_cleanly(text):
    try:
        q = parse_name(text)
    except ResolveError as e:
        assert "\n" not in e.line()
    else:
        assert q.framework in set(ALIASES.values())


def test_the_refusal_states_the_grammar():
    with pytest.raises(ResolveError) as e:
        parse_name("torch")
    assert e.value.fix == ("expected <framework>-<version>[-cuda<X.Y>|-cu<NNN>|-cpu][-py<X.Y>[t]][-<flavour>][-arm64|-amd64], "
                           "e.g. torch-2.4-cuda12 or tf-2.15-cpu (list them: envman matrix ls)")
    assert e.value.what == "cannot parse stack name 'torch'"


def test_stack_json_round_trip(mini):
    import json

    from envman.stack.resolve import resolve
    from envman.stack.names import Stack

    s = resolve(mini, "torch-2.4-cuda12")
    d = s.to_json()
    assert isinstance(d["sass_archs"], list) and isinstance(d["packages"], list)
    assert json.loads(json.dumps(d)) == d
    back = Stack.from_json(json.loads(json.dumps(d)))
    assert back == s and isinstance(back.sass_archs, tuple)
    assert Stack.from_json({**d, "unknown_key": 1}) == s  # keys from a newer envman are ignored


@pytest.mark.parametrize("text, version", [("jax-0.9.0.1", "0.9.0.1"), ("jax-0.9.0.1-cuda12", "0.9.0.1"),
                                           ("tf-2.15.0.0-cpu", "2.15.0.0")])
def test_four_part_releases(text, version):
    assert parse_name(text).version == version


# --------------------------------------------------------------------------- typos get a suggestion


def _typos(word: str) -> list[str]:
    """Adjacent letters swapped, and one letter dropped, at each position (not the word itself)."""
    out = {word[:i] + word[i + 1] + word[i] + word[i + 2:] for i in range(len(word) - 1)}
    out |= {word[:i] + word[i + 1:] for i in range(len(word)) if len(word) > 3}
    return sorted(w for w in out if w != word and not any(w == x for x in (*ALIASES, *FLAVOURS, *PLATFORM_WORDS)))


_WORD_CASES = (
    [(f"{{}}-2.7-cuda12.8", alias) for alias in ALIASES if len(alias) > 3]
    + [(f"torch-2.7-cuda12.8-{{}}", flavour) for flavour in FLAVOURS]
    + [(f"torch-2.9-cuda12.8-{{}}", platform) for platform in PLATFORM_WORDS]
    + [("torch-2.7-{}12.8", "cuda"), ("torch-2.4-cuda12-{}3.10", "py")]
)


@pytest.mark.parametrize("template, word", _WORD_CASES)
def test_a_misspelt_word_of_a_name_is_offered_back(template, word):
    """Every word of the grammar, misspelt in each simple way, is offered back spelt right
    (`torhc-2.7-cuda12.8` got only the grammar)."""
    from envman.stack.names import spelling_fixes

    for typo in _typos(word):
        name = template.format(typo)
        try:
            parse_name(name)
            continue  # the typo is itself another valid word (e.g. cu for cuda)
        except ResolveError:
            pass
        assert template.format(word) in spelling_fixes(name), (name, spelling_fixes(name))


@given(st.text(max_size=60))
def test_spelling_fixes_only_offer_names_that_parse(text):
    from envman.stack.names import spelling_fixes

    for cand in spelling_fixes(text):
        parse_name(cand)


def test_resolve_offers_the_fix_and_the_newest_release(mini):
    from envman.stack.resolve import resolve

    with pytest.raises(ResolveError) as e:
        resolve(mini, "torhc-2.4-cuda12")
    assert "did you mean torch-2.4-cuda12 (" in e.value.fix and "pytorch-2.4" not in e.value.fix
    newest = max(b.version for b in mini.builds if b.framework == "torch")
    with pytest.raises(ResolveError) as e:
        resolve(mini, "torch-99.0")
    assert f"newest torch release in the matrix is {newest}" in e.value.fix


def test_a_name_of_exactly_the_limit_is_parsed_and_one_more_is_one_exact_line():
    from envman.stack.names import MAX_NAME, parse_name

    at_limit = "torch-2.4-cuda12.4-py3.12-" + "x" * (MAX_NAME - len("torch-2.4-cuda12.4-py3.12-"))
    assert len(at_limit) == MAX_NAME
    with pytest.raises(ResolveError) as e:
        parse_name(at_limit)
    assert "characters long" not in str(e.value)  # refused for its words, not its length
    over = at_limit + "x"
    with pytest.raises(ResolveError) as e:
        parse_name(over)
    assert (e.value.what, e.value.fix) == (
        f"stack name {over[:40]!r}… is {MAX_NAME + 1} characters long, more than {MAX_NAME}",
        "give a stack name such as torch-2.4-cuda12 (list them: envman matrix ls)")


@pytest.mark.parametrize("name,variant,problems", [
    ("torch-2.4.1+corp1-cpu", "cpu", ["the row name 'torch-2.4.1+corp1-cpu' is not a stack name users can type (a local "
                                      "version such as +corp1, or characters beyond letters, digits and .-)"]),
    ("torch-2.4.1-cpu", "c/" + "x" * 38, [f"variant {'c/' + 'x' * 38!r} is not 1-64 letters, digits or ._+-"]),
    ("torch-2.4.1-cpu", "c/" + "x" * 39, [f"variant {('c/' + 'x' * 39)[:40]!r}… is not 1-64 letters, digits or ._+-"]),
    ("torch-2.4.1+" + "x" * 68, "cpu", [f"the row name {'torch-2.4.1+' + 'x' * 68!r} is not a stack name users can type (a "
                                      "local version such as +corp1, or characters beyond letters, digits and .-)"]),
    ("torch-2.4.1+" + "x" * 69, "cpu", [f"the row name {('torch-2.4.1+' + 'x' * 68)!r} is not a stack name users can type "
                                      "(a local version such as +corp1, or characters beyond letters, digits and .-)"]),
    ("torch-2.4.1-cpu", "cpu", []),
], ids=["local-version", "variant-of-40", "variant-of-41", "name-of-80", "name-of-81-clipped", "clean"])
def test_each_row_name_problem_is_one_exact_line(name, variant, problems):
    from envman.stack.names import row_name_problems

    assert row_name_problems(name, variant) == problems


@pytest.mark.parametrize("base,custom,tag", [
    ("nvidia/cuda:12.4.1-base-ubuntu22.04", False, "12.4.1-base-ubuntu22.04"),
    ("docker.io/nvidia/cuda:12.4.1-base-ubuntu22.04", False, "12.4.1-base-ubuntu22.04"),
    ("nvidia/cuda:12.4.1-base-ubuntu22.04", True, None),
    ("mirror.example:5000/nvidia/cuda:12.4.1-base-ubuntu22.04", False, None),
    ("ubuntu:22.04", False, None),
    # pinned by digest: not a tag envman may pull again or rebuild from NVIDIA's recipe
    ("nvidia/cuda:12.4.1-base-ubuntu22.04@sha256:" + "a" * 64, False, None),
], ids=["hub-short", "hub-long", "custom", "mirror-with-port", "not-nvidia", "pinned-by-digest"])
def test_the_nvidia_tag_of_a_base_is_read_only_from_nvidia_s_own_repository(base, custom, tag):
    from dataclasses import replace

    from envman.matrix.load import load_matrix
    from envman.stack.names import nvidia_tag
    from envman.stack.resolve import resolve

    stack = replace(resolve(load_matrix(), "torch-2.4-cuda12"), base_image=base, base_image_custom=custom)
    assert nvidia_tag(stack) == tag


def test_spelling_fixes_offer_the_three_closest_names_at_most():
    from envman.stack.names import spelling_fixes

    # four names parse one word away; the closest three are offered, the closest first
    assert spelling_fixes("torch-2.7-cpu-runtim") == ["torch-2.7-cpu-runtime", "torch-2.7-cudnn-runtime", "torch-2.7-runtime"]
    assert len(spelling_fixes("torch-2.7-cpu-runtim", limit=4)) == 4


def test_spelling_fixes_read_a_misspelt_two_word_flavour_as_one_word():
    from envman.stack.names import spelling_fixes

    assert spelling_fixes("torch-2.7-cuda12.8-cudnn-rt") == ["torch-2.7-cuda12.8-cudnn-runtime", "torch-2.7-cuda12.8-cudnn-devel"]


def test_spelling_fixes_read_names_up_to_the_longest_name_read():
    from envman.stack.names import MAX_NAME, spelling_fixes

    at = "torh-2." + "1" * (MAX_NAME - len("torh-2."))
    assert len(at) == MAX_NAME and spelling_fixes(at) == ["torch" + at[4:], "pytorch" + at[4:]]
    assert spelling_fixes(at + "1") == []  # one past: parse_name refuses it by its length first


@pytest.mark.parametrize("name", ["tf-2.7-cpu", "torch-2.7-cuda12.8-cudnn-runtime", "jax-0.4-arm64"])
def test_spelling_fixes_never_offer_the_name_given(name):
    from envman.stack.names import spelling_fixes

    assert name not in spelling_fixes(name) and name.upper() not in spelling_fixes(name.upper())


@pytest.mark.parametrize("name,fixes", [
    # "cupy" is as close to "py" and "cu" (neither parses there) as to "cuda" (parses)
    ("torch-2.4-cupy12.4", ["torch-2.4-cuda12.4"]),
    # "runtime" is closest to the flavours, which do not parse as a framework
    ("runtime-2.4", ["onnxruntime-2.4", "onnxruntime-gpu-2.4"]),
    ("torch-2.4-cudnn-rntime", ["torch-2.4-cudnn-runtime", "torch-2.4-runtime", "torch-2.4-cudnn-devel"]),
])
def test_a_fix_that_parses_is_offered_even_where_closer_words_do_not_parse(name, fixes):
    from envman.stack.names import spelling_fixes

    assert spelling_fixes(name) == fixes
