"""A corpus of hostile command lines for the CLI (used by test_hostile_cli.py).

Each case is (id, words, setup): ``setup`` names files the sandbox prepares first (see
``test_hostile_cli.sandbox``): ``{bin}`` a binary file, ``{utf16}`` a UTF-16 TOML file, ``{dir}``
a directory, ``{fifo}`` a FIFO, ``{unreadable}`` a file without read permission, ``{dev}``
/dev/zero, ``{proj_*}`` project directories with a hostile envman.toml.
"""

from __future__ import annotations

LONG = "a" * 10_000
NUL = "x\x00y"
NL = "x\ny"

_FILES = ["{bin}", "{utf16}", "{dir}", "{fifo}", "{unreadable}", "{dev}", "{missing}", "{toml_bad}", "{deep}"]

CASES: list[tuple[str, list[str]]] = []


def case(name: str, *words: str) -> None:
    CASES.append((name, list(words)))


# --- matrix ------------------------------------------------------------------------------------
for i, f in enumerate(_FILES):
    case(f"matrix-file-{i}", "--matrix", f, "matrix", "ls")
    case(f"matrix-validate-{i}", "matrix", "validate", f)
for v in ("-1", "abc", "99999999999999999999", "", LONG, NUL, NL, "1.2.3.4.5.6", "535.104.05.1", "0", "-535.1"):
    case(f"explain-driver-{v[:10]!r}", "matrix", "explain", "torch-2.4-cuda12.4", "--driver", v, "--sm", "8.6")
for v in ("99.9", "8.10", "0.0", "-1", "sm_999", "8", "abc", "", "8.6.1", "1e5", LONG, NUL, "８.６", "sm_", "compute_86x"):
    case(f"explain-sm-{v[:10]!r}", "matrix", "explain", "torch-2.4-cuda12.4", "--driver", "550.54.15", "--sm", v)
for v in ("no-such-gpu", "", LONG, NUL, NL):
    case(f"explain-gpu-{v[:10]!r}", "matrix", "explain", "torch-2.4-cuda12.4", "--driver", "550.54.15", "--gpu", v)
for name in (LONG, NUL, NL, "", "-", "--", "torch-99", "torch-2.4-cuda12.7", "../../etc/passwd", "torch-2.4-cuda12.4-py9.99",
             "tf-1.0-cuda99", "torch-2.4-cu", "torch-\u202e2.4", "torch-2.4-cuda12.4-nosuchflavour", "TORCH-2.4-CUDA12.4-PY3.10-X-Y"):
    case(f"show-{name[:12]!r}", "matrix", "show", name)
    case(f"render-{name[:12]!r}", "render", name, "-o", "-")
    case(f"build-{name[:12]!r}", "build", name)
for v in ("abc", "", LONG, NUL, "-1", "1.0rc1", "1!2.0", "12.", ".4", "cpu1"):
    case(f"ls-cuda-{v[:10]!r}", "matrix", "ls", "--cuda", v)
for v in ("nosuch", "", LONG, NUL):
    case(f"ls-framework-{v[:10]!r}", "matrix", "ls", "--framework", v)

# --- render / build options ---------------------------------------------------------------------
for opt, vals in {
    "--registry-mirror": ("bad host", "http://x", "u:p@host:5000", "", LONG, NUL, "host:99999999", "-x"),
    "--pip-index": ("ftp://x", "https://x.example/aB3kF9xQ2mZ7pL4wR8tYq/simple", "https://x/simple?token=abc", "", LONG, NUL, "https://x/$(id)"),
    "--apt-mirror": ("file:///etc", "", NUL, "http://x/ `id`"),
    "--framework-index": ("https://x/simple#frag", "javascript:alert(1)"),
    "--python-mirror": ("http://u@x/", "x"),
    "--flavour": ("nosuch", "", LONG, NUL, "../x"),
}.items():
    for v in vals:
        case(f"render{opt}-{v[:12]!r}", "render", "torch-2.4-cuda12.4", "-o", "-", opt, v)
for f in _FILES:
    case(f"render-ca-{f}", "render", "torch-2.4-cuda12.4", "-o", "-", "--ca-bundle", f)
    case(f"render-wheelhouse-{f}", "render", "torch-2.4-cuda12.4", "-o", "-", "--wheelhouse", f)
for v in ("0", "-1", "abc", "99999999999999999999", ""):
    case(f"build-jobs-{v!r}", "build", "torch-2.4-cuda12.4", "--jobs", v)
case("build-nothing", "build")
case("build-both", "build", "--all", "torch-2.4-cuda12.4")
case("render-output-file", "render", "torch-2.4-cuda12.4", "-o", "{bin}")
case("render-output-nul", "render", "torch-2.4-cuda12.4", "-o", NUL)
case("render-output-long", "render", "torch-2.4-cuda12.4", "-o", "/tmp/" + LONG)

# --- ci / report ---------------------------------------------------------------------------------
for v in ("5/4", "0/4", "1/0", "-1/4", "a/b", "1", "", "1/4/5", LONG, NUL, "99999999999999999999/1", "1 /4"):
    case(f"ci-shard-{v[:10]!r}", "ci", "run", "--shard", v, "--report", "{tmp}/rep")
for v in ("0", "-1", "abc", "99999999999999999999"):
    case(f"ci-shards-{v!r}", "ci", "plan", "--shards", v)
for v in ("--output=/tmp/envman-hostile-x", "-x", "", LONG, NUL, NL, "a b", "HEAD:x", "origin/main;id", "--help"):
    case(f"ci-changed-since-{v[:12]!r}", "ci", "plan", f"--changed-since={v}")
for v in ("yaml", "", NUL):
    case(f"ci-format-{v!r}", "ci", "plan", "--format", v)
for v in ("nosuch-row", LONG, NUL):
    case(f"ci-rows-{v[:10]!r}", "ci", "plan", "--rows", v)
for i, f in enumerate(_FILES):
    case(f"report-{i}", "report", f, "--markdown", "-")
case("report-html-into-dir", "report", "{results}", "--html", "{dir}")
case("report-html-nul", "report", "{results}", "--html", NUL)

# --- doctor -----------------------------------------------------------------------------------
for v in ("-1", "abc", "", LONG, NUL):
    case(f"doctor-driver-{v[:10]!r}", "doctor", "--driver", v, "--sm", "8.6")
for v in ("99.9", "8.10", "-1", "", LONG, NUL):
    case(f"doctor-sm-{v[:10]!r}", "doctor", "--driver", "550.54.15", "--sm", v)
case("doctor-gpu-and-sm", "doctor", "--driver", "550.54.15", "--sm", "8.6", "--gpu", "a100")

# --- projects ---------------------------------------------------------------------------------
for v in (LONG, NUL, NL, "", "Bad Name", "-x", "../x", "x" * 64):
    case(f"init-name-{v[:10]!r}", "project", "init", "--env", "torch-2.4-cuda12.4", "--name", v)
for v in ("torch-99-cuda99", "nosuch", LONG, NUL, NL, ""):
    case(f"init-env-{v[:10]!r}", "project", "init", "--env", v)
for f in _FILES + ["{proj_utf16}", "{proj_bin}", "{proj_dir}", "{proj_fifo}", "{proj_unreadable}",
                   "{proj_req_fifo}", "{proj_req_dev}", "{proj_req_abs}", "{proj_req_up}", "{proj_req_link}",
                   "{proj_sock_mount}", "{proj_home_mount}", "{proj_ssh_mount}", "{proj_rel_escape}",
                   "{proj_env_nl}", "{proj_huge_shm}", "{proj_tilde_user}", "{proj_deep}", "{proj_etc_link}"]:
    case(f"project-add-{f}", "project", "add", f)
    case(f"project-show-{f}", "project", "show", f)
    case(f"project-trust-{f}", "project", "trust", f)
    case(f"run-{f}", "run", f, "--dry-run", "--no-gpu")
for v in (LONG, NUL, NL, "", "nosuch"):
    case(f"project-rm-{v[:10]!r}", "project", "rm", v)
    case(f"project-show-name-{v[:10]!r}", "project", "show", v)

# --- run options ------------------------------------------------------------------------------
P = "{proj_ok}"
for opt, vals in {
    "--shm-size": ("0", "-1", "abc", "99999999999999999999999t", "1e9", "", LONG, NUL, "8 g", "9" * 40),
    "--gpus": ("-1", "abc", "device=", "device=0;rm", "", LONG, NUL, "99999999999999999999"),
    "--port": ("0", "65536", "-1", "abc", "1:2:3", "", LONG, NUL, "80:"),
    "--mount": ("/var/run/docker.sock:/s", "/:/host", "/etc:/e", "~:/h", "~/.ssh:/s", "/proc:/p", "relative:/x",
                "/tmp", "/tmp:relative", "/tmp:/", "/tmp:/workspace", "", NUL, NL, LONG, "~root:/r", "/tmp:/proc/x",
                "/run:/r", "/home:/h", "/var:/v", "/sys/kernel:/k", "/dev/null:/n"),
    "--env-var": ("=x", "1A=x", "A B=x", NUL + "=x", "A=" + NUL, "A=" + NL, "ENVMAN_HOSTILE_UNSET", LONG + "=1", ""),
    "--stack": ("nosuch", "", LONG, NUL, "torch-2.4-cuda12.7"),
}.items():
    for v in vals:
        case(f"run{opt}-{v[:12]!r}", "run", P, "--dry-run", "--no-gpu", opt, v)
case("run-gpus-and-no-gpu", "run", P, "--dry-run", "--no-gpu", "--gpus", "all")
case("run-unknown-option", "run", P, "--dry-run", "--frobnicate")
case("run-name-nul", "run", NUL, "--dry-run")
case("run-name-long", "run", LONG, "--dry-run")
case("run-missing-project", "run", "nosuch-project", "--dry-run")
