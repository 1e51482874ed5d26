"""GPU names: every GPU on NVIDIA's CUDA GPUs pages answers with its compute capability, by the
name the page prints, the name ``nvidia-smi`` prints and the short forms users type; a miss
suggests names. The rules are tested over every entry of the list, not on a few examples."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from envman.matrix.gpus import GpuIndex, split_details, tokens
from envman.matrix.load import load_matrix
from envman.matrix.validate import validate

# Names and compute capabilities as NVIDIA's pages list them (developer.nvidia.com/cuda-gpus and
# /cuda-legacy-gpus): each must answer, with exactly this compute capability.
CURRENT = [
    ('NVIDIA GB10 (DGX Spark)', '12.1'),
    ('NVIDIA RTX PRO 6000 Blackwell Server Edition', '12.0'),
    ('NVIDIA RTX PRO 6000 Blackwell Workstation Edition', '12.0'),
    ('NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition', '12.0'),
    ('NVIDIA RTX PRO 5000 Blackwell', '12.0'),
    ('NVIDIA RTX PRO 4500 Blackwell', '12.0'),
    ('NVIDIA RTX PRO 4000 Blackwell', '12.0'),
    ('GeForce RTX 5090', '12.0'),
    ('GeForce RTX 5080', '12.0'),
    ('GeForce RTX 5070 Ti', '12.0'),
    ('GeForce RTX 5070', '12.0'),
    ('GeForce RTX 5060 Ti', '12.0'),
    ('GeForce RTX 5060', '12.0'),
    ('GeForce RTX 5050', '12.0'),
    ('Jetson T5000', '11.0'),
    ('NVIDIA B300', '10.3'),
    ('NVIDIA B200', '10.0'),
    ('NVIDIA L4', '8.9'),
    ('NVIDIA L40S', '8.9'),
    ('GeForce RTX 4090', '8.9'),
    ('NVIDIA A40', '8.6'),
    ('NVIDIA A10', '8.6'),
    ('NVIDIA RTX A6000', '8.6'),
    ('GeForce RTX 3090', '8.6'),
    ('GeForce RTX 3080', '8.6'),
    ('GeForce RTX 3060', '8.6'),
    ('NVIDIA A100', '8.0'),
    ('NVIDIA T4', '7.5'),
    ('NVIDIA TITAN RTX', '7.5'),
    ('GeForce RTX 2080 Ti', '7.5'),
    ('GeForce RTX 2070', '7.5'),
    ('GeForce RTX 2060', '7.5'),
    ('NVIDIA RTX PRO 4500 Blackwell Server Edition', '12.0'),
    ('NVIDIA RTX PRO 4000 Blackwell SFF Edition', '12.0'),
    ('NVIDIA RTX PRO 2000 Blackwell', '12.0'),
    ('Jetson T4000', '11.0'),
    ('NVIDIA GB300', '10.3'),
    ('NVIDIA GB200', '10.0'),
    ('NVIDIA GH200', '9.0'),
    ('NVIDIA H200', '9.0'),
    ('NVIDIA H100', '9.0'),
    ('NVIDIA L40', '8.9'),
    ('NVIDIA RTX 6000 Ada', '8.9'),
    ('NVIDIA RTX 5000 Ada', '8.9'),
    ('NVIDIA RTX 4500 Ada', '8.9'),
    ('NVIDIA RTX 4000 Ada', '8.9'),
    ('NVIDIA RTX 4000 SFF Ada', '8.9'),
    ('NVIDIA RTX 2000 Ada', '8.9'),
    ('GeForce RTX 4080', '8.9'),
    ('GeForce RTX 4070 Ti', '8.9'),
    ('GeForce RTX 4070', '8.9'),
    ('GeForce RTX 4060 Ti', '8.9'),
    ('GeForce RTX 4060', '8.9'),
    ('GeForce RTX 4050', '8.9'),
    ('Jetson AGX Orin', '8.7'),
    ('Jetson Orin NX', '8.7'),
    ('Jetson Orin Nano', '8.7'),
    ('NVIDIA A16', '8.6'),
    ('NVIDIA A2', '8.6'),
    ('NVIDIA RTX A5000', '8.6'),
    ('NVIDIA RTX A4000', '8.6'),
    ('NVIDIA RTX A3000', '8.6'),
    ('NVIDIA RTX A2000', '8.6'),
    ('GeForce RTX 3090 Ti', '8.6'),
    ('GeForce RTX 3080 Ti', '8.6'),
    ('GeForce RTX 3070 Ti', '8.6'),
    ('GeForce RTX 3070', '8.6'),
    ('GeForce RTX 3060 Ti', '8.6'),
    ('GeForce RTX 3050 Ti', '8.6'),
    ('GeForce RTX 3050', '8.6'),
    ('NVIDIA A30', '8.0'),
    ('Quadro RTX 8000', '7.5'),
    ('Quadro RTX 6000', '7.5'),
    ('Quadro RTX 5000', '7.5'),
    ('Quadro RTX 4000', '7.5'),
    ('NVIDIA T1000', '7.5'),
    ('NVIDIA T600', '7.5'),
    ('NVIDIA T400', '7.5'),
    ('Quadro RTX 3000', '7.5'),
    ('Quadro T2000', '7.5'),
    ('NVIDIA T1200', '7.5'),
    ('NVIDIA T500', '7.5'),
    ('GeForce GTX 1650 Ti', '7.5'),
    ('GeForce RTX 2080', '7.5'),
]

LEGACY = [
    ('NVIDIA V100', '7.0'),
    ('Tesla P40', '6.1'),
    ('Tesla P4', '6.1'),
    ('P620', '6.1'),
    ('NVIDIA TITAN Xp', '6.1'),
    ('NVIDIA TITAN X', '6.1'),
    ('GeForce GTX 1080 Ti', '6.1'),
    ('GeForce GTX 1080', '6.1'),
    ('GeForce GTX 1070', '6.1'),
    ('GeForce GTX 1060', '6.1'),
    ('Tesla P100', '6.0'),
    ('GeForce GTX 970', '5.2'),
    ('Tesla K80', '3.7'),
    ('Jetson AGX Xavier', '7.2'),
    ('Jetson Xavier NX', '7.2'),
    ('Quadro GV100', '7.0'),
    ('NVIDIA TITAN V', '7.0'),
    ('Jetson TX2', '6.2'),
    ('Quadro P6000', '6.1'),
    ('Quadro P5200', '6.1'),
    ('Quadro P5000', '6.1'),
    ('Quadro P4200', '6.1'),
    ('Quadro P4000', '6.1'),
    ('Quadro P3200', '6.1'),
    ('Quadro P3000', '6.1'),
    ('Quadro P2200', '6.1'),
    ('Quadro P2000', '6.1'),
    ('Quadro P1000', '6.1'),
    ('Quadro P620', '6.1'),
    ('Quadro P600', '6.1'),
    ('Quadro P500', '6.1'),
    ('Quadro P400', '6.1'),
    ('P520', '6.1'),
    ('GeForce GTX 1070 Ti', '6.1'),
    ('GeForce GTX 1050', '6.1'),
    ('Quadro GP100', '6.0'),
    ('Jetson Nano', '5.3'),
    ('Tesla M60', '5.2'),
    ('Tesla M40', '5.2'),
    ('Quadro M6000 24GB', '5.2'),
    ('Quadro M6000', '5.2'),
    ('Quadro M5000', '5.2'),
    ('Quadro M4000', '5.2'),
    ('Quadro M2000', '5.2'),
    ('Quadro M5500M', '5.2'),
    ('Quadro M2200', '5.2'),
    ('Quadro M620', '5.2'),
    ('GeForce GTX TITAN X', '5.2'),
    ('GeForce GTX 980 Ti', '5.2'),
    ('GeForce GTX 980', '5.2'),
    ('GeForce GTX 960', '5.2'),
    ('GeForce GTX 950', '5.2'),
    ('GeForce GTX 980M', '5.2'),
    ('GeForce GTX 970M', '5.2'),
    ('GeForce GTX 965M', '5.2'),
    ('GeForce 910M', '5.2'),
    ('Quadro K2200', '5.0'),
    ('Quadro K1200', '5.0'),
    ('Quadro K620', '5.0'),
    ('Quadro M1200', '5.0'),
    ('Quadro M520', '5.0'),
    ('Quadro M5000M', '5.0'),
    ('Quadro M4000M', '5.0'),
    ('Quadro M3000M', '5.0'),
    ('Quadro M2000M', '5.0'),
    ('Quadro M1000M', '5.0'),
    ('Quadro K620M', '5.0'),
    ('Quadro M600M', '5.0'),
    ('Quadro M500M', '5.0'),
    ('NVIDIA NVS 810', '5.0'),
    ('GeForce GTX 750 Ti', '5.0'),
    ('GeForce GTX 750', '5.0'),
    ('GeForce GTX 960M', '5.0'),
    ('GeForce GTX 950M', '5.0'),
    ('GeForce 940M', '5.0'),
    ('GeForce 930M', '5.0'),
    ('GeForce GTX 850M', '5.0'),
    ('GeForce 840M', '5.0'),
    ('GeForce 830M', '5.0'),
    ('Tesla K40', '3.5'),
    ('Tesla K20', '3.5'),
    ('Quadro K6000', '3.5'),
    ('Quadro K5200', '3.5'),
    ('Quadro K610M', '3.5'),
    ('Quadro K510M', '3.5'),
    ('GeForce GTX TITAN Z', '3.5'),
    ('GeForce GTX TITAN Black', '3.5'),
    ('GeForce GTX TITAN', '3.5'),
    ('GeForce GTX 780 Ti', '3.5'),
    ('GeForce GTX 780', '3.5'),
    ('GeForce GT 730', '3.5'),
    ('GeForce GT 720', '3.5'),
    ('GeForce GT 705', '3.5'),
    ('GeForce GT 640 (GDDR5)', '3.5'),
    ('GeForce 920M', '3.5'),
    ('Jetson TK1', '3.2'),
    ('Tesla K10', '3.0'),
    ('Quadro K5000', '3.0'),
    ('Quadro K4200', '3.0'),
    ('Quadro K4000', '3.0'),
    ('Quadro K2000', '3.0'),
    ('Quadro K2000D', '3.0'),
    ('Quadro K600', '3.0'),
    ('Quadro K420', '3.0'),
    ('Quadro 410', '3.0'),
    ('GeForce GTX 770', '3.0'),
    ('GeForce GTX 760', '3.0'),
    ('GeForce GTX 690', '3.0'),
    ('GeForce GTX 680', '3.0'),
    ('GeForce GTX 670', '3.0'),
    ('GeForce GTX 660 Ti', '3.0'),
    ('GeForce GTX 660', '3.0'),
    ('GeForce GTX 650 Ti BOOST', '3.0'),
    ('GeForce GTX 650 Ti', '3.0'),
    ('GeForce GTX 650', '3.0'),
    ('GeForce GT 740', '3.0'),
    ('GeForce GTX 560 Ti', '2.1'),
    ('GeForce GTX 550 Ti', '2.1'),
    ('GeForce GTX 460', '2.1'),
    ('GeForce GTS 450', '2.1'),
    ('GeForce GTX 590', '2.0'),
    ('GeForce GTX 580', '2.0'),
    ('GeForce GTX 570', '2.0'),
    ('GeForce GTX 480', '2.0'),
    ('GeForce GTX 470', '2.0'),
    ('GeForce GTX 465', '2.0'),
    ('Tesla C2075', '2.0'),
    ('Tesla C2050/C2070', '2.0'),
]


@pytest.fixture(scope="module")
def m():
    return load_matrix()


@pytest.mark.parametrize("name, cc", CURRENT + LEGACY, ids=[n for n, _ in CURRENT + LEGACY])
def test_every_name_on_nvidias_pages_answers_with_its_compute_capability(m, name, cc):
    g = m.gpu(name)
    assert g is not None, (name, m.gpu_index.suggestions(name))
    assert str(g.cc) == cc


def _all_names(m):
    return [(g, n) for g in m.gpus for n in dict.fromkeys((g.name, g.id, *g.aliases))]


def test_every_gpu_answers_to_its_name_id_and_aliases_in_any_case_and_spacing(m):
    for g, n in _all_names(m):
        for form in (n, n.upper(), n.lower(), n.replace(" ", "-"), n.replace(" ", "_"), "  " + n + " "):
            assert m.gpu(form) is g, (form, g.id)


def test_every_gpu_answers_to_the_nvidia_smi_form_of_its_name(m):
    # nvidia-smi prefixes the maker (NVIDIA GeForce RTX 4090, NVIDIA L40S, NVIDIA RTX A6000)
    for g in m.gpus:
        smi = "NVIDIA " + re.sub(r"^(NVIDIA|Tesla|Quadro) ", "", g.name)
        assert m.gpu(smi) is g, (smi, g.id)


def test_geforce_model_numbers_alone_and_glued_to_the_series_answer(m):
    plain = [g for g in m.gpus if re.fullmatch(r"GeForce (RTX|GTX) \d{4}( Ti| SUPER)?", g.name)]
    assert len(plain) > 40
    for g in plain:
        series, number, *suffix = g.name.split()[1:]
        for form in (" ".join([number, *suffix]), series + number + "".join(suffix), f"{series}-{number}"
                     + "".join("-" + s for s in suffix)):
            assert m.gpu(form) is g, (form, g.name)


@pytest.mark.parametrize("smi, gid", [
    ("NVIDIA L40S", "l40s"),
    ("NVIDIA GH200 480GB", "gh200"),
    ("NVIDIA GeForce RTX 4090", "rtx4090"),
    ("Tesla V100-SXM2-16GB", "v100-sxm2"),
    ("Tesla V100-SXM2-32GB", "v100-sxm2"),
    ("Tesla V100-PCIE-32GB", "v100-pcie"),
    ("Tesla V100-FHHL-16GB", "v100-pcie"),  # FHHL is a PCIe card
    ("NVIDIA A100-SXM4-80GB", "a100-80gb-sxm"),
    ("NVIDIA A100-SXM4-40GB", "a100-40gb-sxm"),
    ("NVIDIA A100-PCIE-40GB", "a100-40gb-sxm"),  # the PCIe board: the row of its memory size
    ("NVIDIA H100 80GB HBM3", "h100-sxm"),
    ("NVIDIA H100 PCIe", "h100-pcie"),
    ("NVIDIA RTX 6000 Ada Generation", "rtx-6000-ada"),
    ("NVIDIA RTX 4000 SFF Ada Generation", "rtx-4000-sff-ada"),
    ("Tesla T4", "t4"),
    ("Quadro RTX 8000", "quadro-rtx-8000"),
    ("4090", "rtx4090"),
    ("rtx4090", "rtx4090"),
    ("L40S", "l40s"),
    ("1080ti", "gtx1080ti"),
    ("GTX TITAN X", "gtx-titan-x"),  # Maxwell, 5.2 ...
    ("TITAN X", "titanx-pascal"),  # ... and Pascal, 6.1: the words tell them apart
    ("NVIDIA GeForce RTX 5090 Laptop GPU", "rtx5090-laptop"),  # the laptop row where the list has one
    ("NVIDIA GeForce RTX 4060 Laptop GPU", "rtx-4060"),  # else its desktop chip (same compute capability)
    ("5090", "rtx5090"),  # a short form is the desktop card, not the laptop one
])
def test_names_nvidia_smi_prints_and_short_forms(m, smi, gid):
    g = m.gpu(smi)
    assert g is not None and g.id == gid, (smi, g and g.id)


@pytest.mark.parametrize("query, among", [
    ("Orin NX Nano", {"Jetson Orin NX", "Jetson Orin Nano"}),  # no GPU has all these words
    ("RTX 4080 Ultra", {"GeForce RTX 4080"}),
    ("geforce rtx 4085", {"GeForce RTX 4080"}),
    ("Quadro P6200", {"Quadro P6000"}),
])
def test_a_miss_suggests_names_by_words_and_spelling(m, query, among):
    assert m.gpu(query) is None
    assert among <= set(m.gpu_index.suggestions(query, n=5)), m.gpu_index.suggestions(query, n=5)


def test_unknown_gpu_is_one_line_exit_2_with_suggestions():
    from tests.support.cli import run_envman

    p = run_envman(["matrix", "explain", "torch-2.4-cuda12", "--driver", "560.35.03", "--gpu", "RTX 4080 Ultra"])
    assert p.returncode == 2 and "Traceback" not in p.stderr
    line = p.stderr.strip()
    assert "\n" not in line and "unknown GPU 'RTX 4080 Ultra'" in line and "did you mean GeForce RTX 4080" in line


def test_explain_answers_for_an_nvidia_smi_name():
    from tests.support.cli import run_envman

    p = run_envman(["matrix", "explain", "torch-2.4-cuda12", "--driver", "560.35.03", "--gpu", "NVIDIA L40S"])
    assert p.returncode == 0 and "sm_89" in p.stdout


# --- the tokens --------------------------------------------------------------------------------


@pytest.mark.parametrize("a, b", [
    ("NVIDIA GeForce RTX 4090", "rtx4090"),
    ("GeForce GTX 1080 Ti", "gtx1080ti"),
    ("RTX-4070-SUPER", "rtx 4070super"),
    ("NVIDIA GH200 480GB", "gh200 480 GB"),
    ("Tesla V100-SXM2-16GB", "v100 sxm2 16gb"),
    ("GeForce RTX 5090 Laptop GPU", "rtx 5090 mobile"),
])
def test_spellings_of_one_name_give_the_same_tokens(a, b):
    assert tokens(a) == tokens(b)


@pytest.mark.parametrize("a, b", [("L40", "L40S"), ("TITAN X", "GTX TITAN X"), ("A100", "H100"), ("B200", "GB200"),
                                  ("RTX 4000 Ada", "RTX 4000 SFF Ada"), ("RTX A4000", "RTX 4000")])
def test_different_gpus_keep_different_tokens(a, b):
    assert set(tokens(a)) != set(tokens(b))


def test_board_details_are_set_apart_from_the_model():
    assert split_details(tokens("NVIDIA A100-SXM4-80GB")) == ({"a100"}, {"sxm4", "80", "gb"})
    assert split_details(tokens("NVIDIA V100 SXM2 (16/32 GB)")) == ({"v100"}, {"sxm2", "16", "32", "gb"})
    assert split_details(tokens("NVIDIA GH200 480GB")) == ({"gh", "200"}, {"480", "gb"})


# --- matrix validate ---------------------------------------------------------------------------


def test_two_gpus_whose_names_read_the_same_are_reported(mini):
    g = mini.gpus[0]
    twin = replace(g, id="twin", name=g.name.upper().replace(" ", "-"), aliases=())
    problems = [str(p) for p in validate(replace(mini, gpus=mini.gpus + (twin,)))]
    assert problems == [f"gpu twin: {twin.name!r} reads the same as a name of gpu {g.id}: one of them can never be found"]


def test_a_gpu_name_of_brand_words_only_is_reported(mini):
    g = replace(mini.gpus[0], id="brand", name="NVIDIA GeForce", aliases=())
    problems = [str(p) for p in validate(replace(mini, gpus=mini.gpus + (g,)))]
    assert problems == ["gpu brand: name 'NVIDIA GeForce' has no word that identifies a GPU"]


def test_an_index_of_no_gpus_finds_nothing():
    assert GpuIndex([]).lookup("4090") is None and GpuIndex([]).suggestions("4090") == []


def test_a_name_that_ties_says_it_names_several_gpus():
    from tests.support.cli import run_envman

    p = run_envman(["matrix", "explain", "torch-2.4-cuda12", "--driver", "560.35.03", "--gpu", "Jetson Orin"])
    line = p.stderr.strip()
    assert p.returncode == 2 and "\n" not in line, line
    assert "GPU 'Jetson Orin' names several GPUs" in line and "Jetson Orin Nano" in line


@pytest.mark.parametrize("printed", ["NVIDIA GeForce GT 1030", "GeForce GT 1030", "GeForce GTX 860M"])
def test_a_name_boards_of_two_compute_capabilities_carry_lists_both_in_one_line(printed):
    """GT 1030 boards carry a GP108 (6.1) or a GK107 (3.0), GTX 860M ones a GM107 (5.0) or a GK104
    (3.0): the name alone gives no compute capability, so the answer names both and asks for --sm."""
    from tests.support.cli import run_envman

    p = run_envman(["matrix", "explain", "torch-2.4-cuda12", "--driver", "560.35.03", "--gpu", printed])
    line = p.stderr.strip()
    assert p.returncode == 2 and "\n" not in line and "Traceback" not in line, line
    want = ("6.1", "3.0") if "1030" in printed else ("5.0", "3.0")
    assert f"GPU {printed!r} names several GPUs: " in line
    assert all(f" is {cc}" in line and f"--sm {cc}" in line for cc in want), line
    # the row's own name answers
    name = line.split("names several GPUs: ")[1].split(" is ")[0]
    assert run_envman(["matrix", "explain", "torch-2.4-cuda12", "--driver", "560.35.03", "--gpu", name]).returncode == 0


def test_explain_names_the_gpu_it_found_and_marks_an_unconfirmed_compute_capability(m):
    import json

    from tests.support.cli import run_envman

    text = run_envman(["matrix", "explain", "torch-2.4-cuda12", "--driver", "560.35.03", "--gpu", "quadro rtx 8000"]).stdout
    assert "  - GPU Quadro RTX 8000: compute capability 7.5 (unconfirmed)" in text.splitlines()
    d = json.loads(run_envman(["matrix", "explain", "torch-2.4-cuda12", "--driver", "560.35.03", "--gpu", "L40S", "--json"]).stdout)
    assert (d["gpu"], d["gpu_status"], d["sm"]) == ("NVIDIA L40S", "confirmed", "8.9")


# --- names as drivers print them: board letters, Max-Q, boards the CUDA pages do not name ---------


@pytest.mark.parametrize("printed, name, cc", [
    ("Tesla K40m", "Tesla K40", "3.5"),  # the passive server board of the K40
    ("Tesla K40c", "Tesla K40", "3.5"),  # its workstation board
    ("Tesla K20m", "Tesla K20", "3.5"),
    ("Tesla K20c", "Tesla K20", "3.5"),
    ("Tesla K20Xm", "Tesla K20Xm", "3.5"),
    ("Tesla K80", "NVIDIA Tesla K80 (dual GK210 board)", "3.7"),
    ("GeForce MX150", "GeForce MX150", "6.1"),
    ("NVIDIA GeForce MX450", "GeForce MX450", "7.5"),
    ("GeForce 940MX", "GeForce 940MX", "5.0"),
    ("GeForce GTX 1050 Ti", "GeForce GTX 1050 Ti", "6.1"),
    ("Tesla V100-SXM2-16GB", "NVIDIA V100 SXM2 (16/32 GB)", "7.0"),
    ("Tesla V100S-PCIE-32GB", "Tesla V100S PCIe 32GB", "7.0"),
    ("Tesla P100-PCIE-16GB", "NVIDIA Tesla P100 PCIe 16GB", "6.0"),
    ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB (SXM4)", "8.0"),
    ("NVIDIA A800-SXM4-80GB", "A800-SXM4-80GB", "8.0"),
    ("NVIDIA A10G", "A10G", "8.6"),
    ("NVIDIA H800", "H800", "9.0"),
    ("Quadro RTX 6000", "Quadro RTX 6000", "7.5"),
    ("NVIDIA GeForce RTX 3080 Laptop GPU", "GeForce RTX 3080 (10GB)", "8.6"),
    ("GeForce GTX 1080 with Max-Q Design", "GeForce GTX 1080", "6.1"),
    ("NVIDIA GeForce RTX 2070 with Max-Q Design", "GeForce RTX 2070", "7.5"),
    ("Quadro RTX 5000 with Max-Q Design", "Quadro RTX 5000", "7.5"),
    ("GeForce GTX 960M", "GeForce GTX 960M", "5.0"),  # a name that ends in M is itself, not a board of the 960
    ("Tesla M4", "Tesla M4", "5.2"),  # a model number that starts with M is no board letter either
])
def test_names_drivers_print(m, printed, name, cc):
    g = m.gpu(printed)
    assert g is not None and (g.name, str(g.cc)) == (name, cc), (printed, g and g.name)


def test_a_board_letter_is_set_aside_only_after_a_letter_and_a_number():
    assert split_details(tokens("Tesla K40m")) == ({"k40"}, {"board-m"})
    assert split_details(tokens("Tesla K20Xm")) == ({"k20x"}, {"board-m"})
    assert split_details(tokens("GeForce GTX 960M")) == ({"gtx", "960m"}, set())  # a bare number keeps its M
    assert split_details(tokens("Tesla M40")) == ({"m40"}, set())
    assert split_details(tokens("GeForce GTX 1080 with Max-Q Design")) == ({"gtx", "1080"}, {"maxq"})


def test_a_board_letter_of_a_gpu_the_list_lacks_finds_nothing(m):
    assert m.gpu("Tesla K99m") is None
    assert m.gpu("GeForce GTX 9999 with Max-Q Design") is None


def test_a_board_of_another_form_factor_loses_to_the_plain_one():
    from envman.matrix.model import Arch, Gpu

    def gpu(i, n, cc):
        return Gpu(id=i, name=n, aliases=(), cc=Arch(*map(int, cc.split("."))), memory_gb=None, bandwidth_gb_s=None,
                   fp32_tflops=None, fp16_tflops=None, source=("test",), status="confirmed")
    idx = GpuIndex([gpu("k40", "Tesla K40", "3.5"), gpu("k40-sxm", "Tesla K40 SXM2", "3.7")])
    assert idx.lookup("Tesla K40m").id == "k40"


def test_rows_named_from_the_pci_id_database_stay_unconfirmed(m):
    rows = [g for g in m.gpus if g.id.startswith("pci-")]
    assert rows and all(g.status == "unconfirmed" for g in rows)
    assert all(any("pci-ids" in s for s in g.source) for g in rows)


# --- names in the forms nvidia-smi and deviceQuery print them (nvidia-smi's name column, `nvidia-smi
# -L`, deviceQuery's "Device 0:" line: the NVIDIA prefix of newer drivers, memory and form-factor
# suffixes, "Laptop GPU", "with Max-Q Design", the Jetson chip names), with the compute capability
# NVIDIA's pages or the same output give ------------------------------------------------------

PRINTED = [
    ("Tesla K40m", "3.5"), ("Tesla K40c", "3.5"), ("Tesla K80", "3.7"), ("Tesla M60", "5.2"), ("Tesla M40 24GB", "5.2"),
    ("Tesla P100-PCIE-16GB", "6.0"), ("Tesla P100-SXM2-16GB", "6.0"), ("Tesla P40", "6.1"), ("Tesla P4", "6.1"),
    ("Tesla V100-SXM2-16GB", "7.0"), ("Tesla V100-SXM2-32GB", "7.0"), ("Tesla V100-PCIE-16GB", "7.0"),
    ("Tesla V100-PCIE-32GB", "7.0"), ("Tesla V100S-PCIE-32GB", "7.0"), ("Tesla T4", "7.5"),
    ("A100-SXM4-40GB", "8.0"), ("A100-SXM4-80GB", "8.0"), ("NVIDIA A100-SXM4-80GB", "8.0"), ("NVIDIA A100-PCIE-40GB", "8.0"),
    ("NVIDIA A100 80GB PCIe", "8.0"), ("NVIDIA A10G", "8.6"), ("NVIDIA A10", "8.6"), ("NVIDIA A30", "8.0"),
    ("NVIDIA A40", "8.6"), ("NVIDIA L4", "8.9"), ("NVIDIA L40S", "8.9"), ("NVIDIA H100 80GB HBM3", "9.0"),
    ("NVIDIA H100 PCIe", "9.0"), ("NVIDIA H100 NVL", "9.0"), ("NVIDIA H200", "9.0"), ("NVIDIA H200 NVL", "9.0"),
    ("NVIDIA GH200 480GB", "9.0"), ("NVIDIA GH200 144G HBM3e", "9.0"), ("NVIDIA B200", "10.0"),
    ("NVIDIA GeForce RTX 3090 Ti", "8.6"), ("NVIDIA GeForce RTX 3090", "8.6"), ("NVIDIA GeForce RTX 4090", "8.9"),
    ("NVIDIA GeForce RTX 4090 Laptop GPU", "8.9"), ("NVIDIA GeForce RTX 4060 Laptop GPU", "8.9"),
    ("NVIDIA GeForce RTX 3050 Ti Laptop GPU", "8.6"), ("NVIDIA GeForce RTX 5090", "12.0"),
    ("NVIDIA GeForce RTX 2080 Super with Max-Q Design", "7.5"), ("GeForce GTX 1050 Ti with Max-Q Design", "6.1"),
    ("GeForce GTX 1080 Ti", "6.1"), ("GeForce GTX 1060 6GB", "6.1"), ("GeForce GTX 1060 3GB", "6.1"),
    ("GeForce GTX 980M", "5.2"), ("GeForce GTX 750 Ti", "5.0"), ("GeForce GT 730", "3.5"), ("GeForce 940MX", "5.0"),
    ("GeForce MX150", "6.1"), ("NVIDIA GeForce MX250", "6.1"), ("GeForce GTX TITAN X", "5.2"), ("TITAN V", "7.0"),
    ("NVIDIA TITAN RTX", "7.5"), ("NVIDIA TITAN Xp", "6.1"), ("Quadro RTX 6000", "7.5"), ("Quadro RTX 8000", "7.5"),
    ("Quadro P1000", "6.1"), ("Quadro K620", "5.0"), ("Quadro T1000", "7.5"), ("NVIDIA T1000 8GB", "7.5"),
    ("NVIDIA RTX A6000", "8.6"), ("NVIDIA RTX A2000 12GB", "8.6"), ("NVIDIA RTX A1000", "8.6"),
    ("NVIDIA RTX A1000 Laptop GPU", "8.6"), ("NVIDIA RTX A1000 6GB Laptop GPU", "8.6"), ("NVIDIA RTX A5000 Laptop GPU", "8.6"),
    ("NVIDIA RTX 6000 Ada Generation", "8.9"), ("NVIDIA RTX 2000 Ada Generation Laptop GPU", "8.9"),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0"), ("NVIDIA A800 80GB PCIe", "8.0"), ("NVIDIA H800", "9.0"),
    ("NVIDIA L20", "8.9"), ("GRID K520", "3.0"),
    ("Orin", "8.7"), ("Xavier", "7.2"), ("NVIDIA Tegra X1", "5.3"), ("NVIDIA Tegra X2", "6.2"),
    ("NVIDIA Jetson AGX Orin", "8.7"), ("Jetson AGX Xavier", "7.2"),
]


@pytest.mark.parametrize("printed, cc", PRINTED)
def test_printed_names_answer_with_their_compute_capability(m, printed, cc):
    g = m.gpu(printed)
    assert g is not None, (printed, m.gpu_index.ambiguous(printed))
    assert str(g.cc) == cc, (printed, g.name, str(g.cc))


def test_a_memory_size_written_with_g_alone_is_a_board_detail():
    assert tokens("NVIDIA GH200 144G HBM3e") == ("gh", "200", "144", "gb", "hbm3e")
    assert split_details(tokens("NVIDIA GH200 144G HBM3e")) == ({"gh", "200"}, {"144", "gb", "hbm3e"})
    assert tokens("GeForce 8800 GT") == ("8800", "gt")  # a word G... that is not a size stays


def test_among_boards_that_differ_only_in_details_the_plain_one_wins():
    from envman.matrix.model import Arch, Gpu

    def gpu(i, n, cc="8.6"):
        return Gpu(id=i, name=n, aliases=(), cc=Arch(*map(int, cc.split("."))), memory_gb=None, bandwidth_gb_s=None,
                   fp32_tflops=None, fp16_tflops=None, source=("test",), status="confirmed")
    laptops = [gpu("a", "RTX A1000 6GB Laptop GPU"), gpu("b", "RTX A1000 Laptop GPU")]
    assert GpuIndex(laptops).lookup("NVIDIA RTX A1000").id == "b"  # fewer details the query does not name
    assert GpuIndex([*laptops, gpu("c", "NVIDIA RTX A1000")]).lookup("NVIDIA RTX A1000").id == "c"
    assert GpuIndex([*laptops, gpu("c", "NVIDIA RTX A1000")]).lookup("RTX A1000 6GB Laptop GPU").id == "a"
    # equal in everything: still a tie, never a pick
    twins = [gpu("x", "NVIDIA Z9 (Pascal)", "6.1"), gpu("y", "NVIDIA Z9 (Kepler)", "3.0")]
    assert GpuIndex(twins).lookup("NVIDIA Z9") is None and len(GpuIndex(twins).ambiguous("NVIDIA Z9")) == 2


def test_a_tie_of_gpus_without_a_compute_capability_keeps_the_old_line():
    from envman.matrix.gpus import unknown_gpu

    class G:
        def __init__(self, i, n):
            self.id, self.name, self.aliases = i, n, ()
    idx = GpuIndex([G("a", "Z9 Alpha"), G("b", "Z9 Beta")])
    what, fix = unknown_gpu(idx, "Z9")
    assert what == "GPU 'Z9' names several GPUs" and fix.endswith("or give --sm X.Y")
