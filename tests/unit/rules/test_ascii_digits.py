"""Every grammar that reads a number from a user (stack names, ports, GPU counts, shm sizes, Slurm
time limits and counts) reads ASCII digits only: the same value written with any other Unicode
digits (Arabic-Indic, fullwidth, Devanagari, ...) is refused as bad input, never accepted as the
number and never an internal error."""

from __future__ import annotations

import pytest

from envman.errors import EnvmanError

#: Each family's zero; its digits are zero + 0..9.
DIGIT_FAMILIES = {"arabic-indic": 0x0660, "extended arabic-indic": 0x06F0, "devanagari": 0x0966,
                  "fullwidth": 0xFF10, "bengali": 0x09E6, "mathematical bold": 0x1D7CE}


def _parsers():
    from envman.cli.slurm import count_option
    from envman.cluster.slurm import check_time
    from envman.project.file import check_shm, parse_gpus, parse_port, shm_bytes
    from envman.stack.names import parse_name

    return {
        "stack name": (parse_name, "torch-2.7-cuda12.8-py3.12"),
        "stack name (cu)": (parse_name, "torch-2.4-cu121"),
        "port": (lambda v: parse_port(v, where="f"), "8080:80"),
        "gpu count": (lambda v: parse_gpus(v, where="f"), "2"),
        "shm size": (lambda v: check_shm(v, where="f"), "8g"),
        "shm bytes": (shm_bytes, "512"),
        "slurm time": (check_time, "1-12:30:00"),
        "slurm count": (lambda v: count_option(v, "--cpus", 1), "4"),
    }


@pytest.mark.parametrize("family", DIGIT_FAMILIES)
@pytest.mark.parametrize("parser", list(_parsers()))
def test_a_number_in_other_digits_is_refused(parser, family):
    parse, ascii_text = _parsers()[parser]
    parse(ascii_text)  # the ASCII spelling is accepted
    zero = DIGIT_FAMILIES[family]
    for i, ch in enumerate(ascii_text):
        if not ch.isdigit():
            continue
        other = ascii_text[:i] + chr(zero + int(ch)) + ascii_text[i + 1:]
        with pytest.raises((EnvmanError, ValueError)):
            parse(other)


@pytest.mark.parametrize("family", DIGIT_FAMILIES)
def test_other_digits_in_a_stack_name_are_one_line_exit_2(family, tmp_path, capfd):
    from envman.main import main

    zero = DIGIT_FAMILIES[family]
    name = "torch-2.7-cuda12.8-py3." + chr(zero + 1) + chr(zero + 2)
    with pytest.raises(SystemExit) as e:
        main(["render", name, "-o", str(tmp_path / "out")])
    err = capfd.readouterr().err
    assert e.value.code == 2 and "cannot parse stack name" in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()
