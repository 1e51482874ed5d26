#!/usr/bin/env python3
"""Mutation testing by module group: ``python scripts/mutation.py GROUP [MUTMUT ARGS...]``.

mutmut reads one configuration, ``[tool.mutmut]`` in ``pyproject.toml`` (the ``pure`` group:
the decision modules). Every other group runs in a copy of the repository of its own,
``.mutation/GROUP/`` (ignored by git), whose ``pyproject.toml`` has that group's modules and test
files in ``[tool.mutmut]``; the copy is brought up to date with the working tree at each call and
keeps mutmut's results, so a second call only runs what changed, and several groups can run
side by side without touching each other.

    python scripts/mutation.py list                 # the groups, their modules and tests
    python scripts/mutation.py security             # mutmut run --max-children 1
    python scripts/mutation.py security results     # any mutmut command: results, show NAME, browse
    python scripts/mutation.py security run 'envman.safefile.x_read_file*'   # rerun these mutants
    python scripts/mutation.py security --fresh     # forget earlier results first
    python scripts/mutation.py security open        # survivors not recorded as equivalent, with diffs
    python scripts/mutation.py security try NAME [TESTS...]  # does a new test kill mutant NAME?

``open`` lists each surviving mutant (or one no test reaches) that
``scripts/mutation-equivalents.txt`` does not record, with its diff, and exits 1 when there is
one: a survivor is either killed by a test or recorded there, one line each, with the reason it
changes nothing that is allowed, refused, printed or written.

``run`` gets ``--max-children 1`` unless another value is given (the machine is shared).
A group is one entry of :data:`GROUPS`: add yours there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".mutation"
#: ``MUTANT  reason`` per line (``#`` starts a comment line): the survivors that are equivalent.
EQUIVALENTS = ROOT / "scripts" / "mutation-equivalents.txt"
#: mutmut's statuses of a mutant no test killed.
OPEN_STATUSES = ("survived", "no tests", "suspicious", "skipped")

#: group → the modules mutmut mutates, the test files that may kill them, and (optional) more
#: pytest arguments. mutmut runs, for each mutant, only the selected tests that call the mutated
#: function. Leave out tests that start a new ``python`` on envman (``-k "not ..."``): mutated
#: code only runs inside mutmut's own processes.
GROUPS: dict[str, dict[str, list[str]]] = {
    # What a project file may ask for, trust, and the safe reader of files and state.
    "security": {
        "modules": [
            "envman/project/policy.py", "envman/project/aliases.py", "envman/project/trust.py", "envman/safefile.py",
            "envman/project/file.py", "envman/project/requirements.py",
        ],
        "tests": [
            "tests/unit/rules/test_clean_errors.py", "tests/unit/rules/test_dry_run_lines.py", "tests/unit/rules/test_escaping.py", "tests/unit/rules/test_exporters_and_runtimes.py", "tests/unit/rules/test_index_urls.py", "tests/unit/rules/test_known_mutants.py", "tests/unit/rules/test_pip_decoding.py", "tests/unit/rules/test_policy.py", "tests/unit/rules/test_printed_and_written.py", "tests/unit/rules/test_protected_mounts.py", "tests/unit/rules/test_requirements_options.py", "tests/unit/rules/test_safefile_refusals.py", "tests/unit/rules/test_state_files.py", "tests/unit/rules/test_trust.py", "tests/unit/rules/test_verdicts.py", "tests/unit/rules/test_security_adversarial.py", "tests/unit/project/test_file.py", "tests/unit/project/test_image_recipe.py", "tests/unit/project/test_registry.py", "tests/unit/project/test_settings.py",
            "tests/unit/config/test_file.py", "tests/unit/run/test_fastpath.py", "tests/unit/project/test_lock.py",
            "tests/unit/run/test_envs.py", "tests/unit/cli/test_build.py", "tests/unit/cli/test_matrix_explain.py", "tests/unit/cli/test_out_user_data.py", "tests/unit/run/test_clean.py", "tests/unit/run/test_command_build_steps.py", "tests/unit/run/test_complete_protocols.py", "tests/unit/run/test_grammar_words.py", "tests/unit/run/test_notebook.py", "tests/unit/run/test_plan_workdir.py", "tests/unit/stack/test_origins.py", "tests/unit/rules/test_hostile_cli.py", "tests/unit/project/test_requirements.py",
            "tests/unit/project/test_file_values.py", "tests/unit/project/test_trust_record.py",
            "tests/unit/test_safefile_rules.py", "tests/unit/project/test_policy_scan.py", "tests/unit/project/test_file_paths.py", "tests/unit/project/test_file_owners.py", "tests/unit/test_safefile_state.py", "tests/unit/project/test_file_mount_grammar.py", "tests/unit/project/test_trust_hostile.py",
        ],
        # Tests that start a new interpreter on envman: mutated code needs mutmut's own process.
        "pytest_args": ["-k", "not (real_console_script or the_full_path or completion_through_bash or edited_module_on_the_run_path or loads_only_the_fast_path)"],
    },
    # The never-mount policy alone, with the tests that exercise it in this process. (The security
    # group's stats run now stops: mutmut 3.8 passes some of test_hostile_cli.py's parametrized ids
    # back to pytest in a form pytest does not find.)
    "policy": {
        "modules": ["envman/project/policy.py", "envman/project/aliases.py"],
        "tests": ["tests/unit/rules/test_clean_errors.py", "tests/unit/rules/test_dry_run_lines.py", "tests/unit/rules/test_escaping.py", "tests/unit/rules/test_exporters_and_runtimes.py", "tests/unit/rules/test_index_urls.py", "tests/unit/rules/test_known_mutants.py", "tests/unit/rules/test_pip_decoding.py", "tests/unit/rules/test_policy.py", "tests/unit/rules/test_printed_and_written.py", "tests/unit/rules/test_protected_mounts.py", "tests/unit/rules/test_requirements_options.py", "tests/unit/rules/test_safefile_refusals.py", "tests/unit/rules/test_state_files.py", "tests/unit/rules/test_trust.py", "tests/unit/rules/test_verdicts.py", "tests/unit/rules/test_security_adversarial.py", "tests/unit/project/test_policy_scan.py",
                  "tests/unit/project/test_policy_homes.py", "tests/unit/project/test_aliases.py"],
        "pytest_args": ["-k", "not (real_console_script or the_full_path or completion_through_bash or bind_mount_of_another_home)"],
    },
    # The network a run joins: made, labelled, checked before it is joined; a full address pool.
    "network": {
        "modules": ["envman/run/network.py"],
        "tests": ["tests/unit/run/test_network.py"],
    },
    # The run plan and the values of `envman run` (mounts, environment, Slurm's GPUs), and what
    # prepares a run (image, pins, project image).
    "run": {
        "modules": ["envman/run/plan.py", "envman/run/prepare.py"],
        "tests": ["tests/unit/run/test_plan_rules.py", "tests/unit/run/test_plan.py", "tests/unit/cli/test_project.py", "tests/unit/engine/test_facts.py", "tests/unit/engine/test_handoff.py", "tests/unit/matrix/test_source_resolve.py", "tests/unit/run/test_command.py", "tests/unit/run/test_doctor.py", "tests/unit/run/test_preflight.py", "tests/unit/run/test_prepare.py", "tests/unit/rules/test_security_adversarial.py"],
    },
    # The words of envman run, exec and shell: where the command starts, and the options read
    # with and without argparse.
    "grammar": {
        "modules": ["envman/run/grammar.py"],
        "tests": ["tests/unit/run/test_grammar.py", "tests/unit/run/test_grammar_words.py"],
        "pytest_args": ["-k", "not (loads_nothing_at_import or loads_no_argparse or imports_neither)"],
    },
    # envman.lock: the package-line grammar, the file, when a build uses it, pip's report.
    "lock": {
        "modules": ["envman/project/lock.py"],
        "tests": ["tests/unit/project/test_lock_rules.py", "tests/unit/project/test_lock.py"],
        "pytest_args": ["-k", "not cli_lock_errors"],
    },
    # Push and pull: registry names, plain HTTP, the labels a pulled image must carry.
    "remote": {
        "modules": ["envman/images/remote.py"],
        "tests": ["tests/unit/images/test_remote_rules.py", "tests/unit/images/test_remote.py", "tests/unit/images/test_store_shared_engine.py", "tests/unit/images/test_pins.py",
                  "tests/unit/rules/test_hostile_state_numbers.py"],
    },
    # Smoke verdicts on the image: digests, the verdict image, which tags move.
    "store": {
        "modules": ["envman/images/store.py"],
        "tests": ["tests/unit/images/test_store_rules.py", "tests/unit/images/test_store_shared_engine.py", "tests/unit/images/test_pins.py", "tests/unit/images/test_remote_rules.py",
                  "tests/unit/rules/test_hostile_state_numbers.py"],
    },
    # Build, smoke, promote, list and prune.
    "build": {
        "modules": ["envman/images/build.py", "envman/images/prune.py"],
        "tests": ["tests/unit/images/test_build_rules.py", "tests/unit/images/test_build.py", "tests/unit/images/test_prune.py",
                  "tests/unit/images/test_failure.py", "tests/unit/images/test_store_shared_engine.py",
                  "tests/unit/images/test_pins.py", "tests/unit/rules/test_hostile_state_numbers.py"],
    },
    # What leaves envman for other tools: Kubernetes, Dev Container and compose files, Slurm jobs.
    "cluster": {
        "modules": ["envman/cluster/export.py", "envman/cluster/gfd.py", "envman/cluster/slurm.py"],
        "tests": [
            "tests/unit/cluster/test_export_rules.py", "tests/unit/cluster/test_slurm_rules.py", "tests/unit/cluster/test_export.py", "tests/unit/cluster/test_gfd.py",
            "tests/unit/cluster/test_slurm.py", "tests/unit/cluster/test_batch.py", "tests/unit/rules/test_clean_errors.py", "tests/unit/rules/test_dry_run_lines.py", "tests/unit/rules/test_escaping.py", "tests/unit/rules/test_exporters_and_runtimes.py", "tests/unit/rules/test_index_urls.py", "tests/unit/rules/test_known_mutants.py", "tests/unit/rules/test_pip_decoding.py", "tests/unit/rules/test_policy.py", "tests/unit/rules/test_printed_and_written.py", "tests/unit/rules/test_protected_mounts.py", "tests/unit/rules/test_requirements_options.py", "tests/unit/rules/test_safefile_refusals.py", "tests/unit/rules/test_state_files.py", "tests/unit/rules/test_trust.py", "tests/unit/rules/test_verdicts.py", "tests/unit/cluster/test_export_hostile.py",
            "tests/unit/cluster/test_slurm_hostile.py",
        ],
        "pytest_args": ["-k", "not (cli_ or dry_run)"],
    },
    # GPUs for containers: the CDI spec envman writes, its validation, its edits on an OCI config.
    "cdi": {
        "modules": ["envman/engine/cdi.py"],
        "tests": ["tests/unit/engine/test_cdi.py", "tests/unit/engine/test_cdi_rules.py", "tests/unit/cli/test_cdi.py", "tests/unit/probe/test_app_recorded_containers.py"],
    },
    # What `envman project detect` concludes from a repository: its frameworks, their pins, the
    # CUDA they need, and the verdict on each pin.
    "detect": {
        "modules": ["envman/project/detect/decide.py", "envman/project/detect/pins.py"],
        "tests": [
            "tests/unit/project/detect/test_decide.py", "tests/unit/project/detect/test_pins.py",
            "tests/unit/project/detect/test_images.py", "tests/unit/project/detect/test_sources.py", "tests/unit/project/detect/test_setupfiles.py",
            "tests/unit/project/detect/test_code.py", "tests/unit/project/detect/test_layer.py",
            "tests/unit/project/detect/test_prose.py", "tests/unit/cli/test_project_detect.py",
        ],
    },
    # What may be reused from a shared engine (the images this user built, the machine-wide base
    # lock) and which tags are stable (``latest``, ``latest-<content key>``).
    "provenance": {
        "modules": ["envman/images/provenance.py", "envman/state.py"],
        "tests": [
            "tests/unit/images/test_provenance_rules.py", "tests/unit/stack/test_resolve_stable_tags.py",
            "tests/unit/test_state_stale_temps.py", "tests/unit/test_state.py", "tests/unit/images/test_build_rules.py",
            "tests/unit/images/test_store_shared_engine.py", "tests/unit/images/test_pins.py", "tests/unit/images/test_remote_rules.py",
            "tests/unit/render/test_dockerfile_content_hash.py", "tests/unit/rules/test_constants_once.py",
        ],
        # Tests that start a new interpreter on envman: mutated code needs mutmut's own process.
        "pytest_args": ["-k", "not (killed_before_its_rename or loads_neither_tempfile)"],
    },
    # matrix update: which releases, CUDA, Pythons and platforms a derived row states, and what is written.
    "update": {
        "modules": ["envman/matrix/update.py"],
        "tests": [
            "tests/unit/matrix/test_update_rules.py", "tests/unit/matrix/test_update.py", "tests/unit/matrix/test_update_cuda_discovery.py",
            "tests/unit/rules/test_clean_errors.py", "tests/unit/rules/test_dry_run_lines.py", "tests/unit/rules/test_escaping.py", "tests/unit/rules/test_exporters_and_runtimes.py", "tests/unit/rules/test_index_urls.py", "tests/unit/rules/test_known_mutants.py", "tests/unit/rules/test_pip_decoding.py", "tests/unit/rules/test_policy.py", "tests/unit/rules/test_printed_and_written.py", "tests/unit/rules/test_protected_mounts.py", "tests/unit/rules/test_requirements_options.py", "tests/unit/rules/test_safefile_refusals.py", "tests/unit/rules/test_state_files.py", "tests/unit/rules/test_trust.py", "tests/unit/rules/test_verdicts.py",
        ],
    },
}


def _pure() -> dict[str, list[str]]:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["mutmut"]
    return {"modules": list(cfg["only_mutate"]), "tests": list(cfg["pytest_add_cli_args_test_selection"])}


def groups() -> dict[str, dict[str, list[str]]]:
    return {"pure": _pure(), **GROUPS}


def _tracked() -> list[str]:
    """The working tree's files git knows of or would add (committed, changed, new, not ignored)."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         check=True, capture_output=True).stdout.decode("utf-8", "surrogateescape")
    return sorted(p for p in out.split("\0") if p and (ROOT / p).is_file())


def _section(group: dict[str, list[str]], top: list[str]) -> str:
    base = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["mutmut"]
    cfg = {
        "source_paths": ["envman/"],
        "only_mutate": group["modules"],
        # Everything else the tests may read (templates, matrices, docs, data).
        "also_copy": [t for t in top if t != "envman"],
        "pytest_add_cli_args": base.get("pytest_add_cli_args", []) + group.get("pytest_args", []),
        "pytest_add_cli_args_test_selection": group["tests"],
        # The copy has no .git: mutmut's change detection by git cannot work there.
        "use_git_change_detection": False,
    }
    return "[tool.mutmut]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in cfg.items())


def _pyproject(section: str) -> str:
    """The repository's pyproject.toml with its ``[tool.mutmut]`` table replaced by ``section``."""
    lines = (ROOT / "pyproject.toml").read_text("utf-8").splitlines(keepends=True)
    out, skipping = [], False
    for line in lines:
        if line.strip().startswith("["):
            skipping = line.strip() == "[tool.mutmut]"
        if not skipping:
            out.append(line)
    return "".join(out).rstrip("\n") + "\n\n" + section


def _sync(dest: Path, files: list[str], modules: list[str]) -> None:
    """Make ``dest`` hold exactly ``files`` as in the working tree; files mutmut copied into
    ``dest/mutants`` and does not mutate are refreshed there too (mutmut copies them once)."""
    wanted = set(files)
    for p in files:
        src, dst = ROOT / p, dest / p
        if not dst.exists() or dst.read_bytes() != src.read_bytes():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
        copied = dest / "mutants" / p
        # A file added since mutmut made its copy (a new test, a new golden file) goes there too.
        if p not in modules and (dest / "mutants").is_dir() and (not copied.exists() or copied.read_bytes() != src.read_bytes()):
            copied.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, copied)
    for d, dirs, names in os.walk(dest):
        rel = Path(d).relative_to(dest)
        if rel == Path("."):
            dirs[:] = [x for x in dirs if x != "mutants"]
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        for n in names:
            p = (rel / n).as_posix()
            if p not in wanted:
                (dest / p).unlink()
                stale = dest / "mutants" / p
                if stale.exists():
                    stale.unlink()


def equivalents() -> dict[str, str]:
    """The recorded equivalent mutants → their reason."""
    out: dict[str, str] = {}
    if EQUIVALENTS.exists():
        for line in EQUIVALENTS.read_text("utf-8").splitlines():
            name, _, why = line.strip().partition(" ")
            if name and not name.startswith("#"):
                out[name] = why.strip()
    return out


def open_mutants(results: str, recorded: dict[str, str]) -> list[str]:
    """The mutants ``mutmut results`` shows as not killed that ``recorded`` does not name."""
    out = []
    for line in results.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and status in OPEN_STATUSES and name not in recorded:
            out.append(name)
    return out


def _open(dest: Path) -> int:
    """Print each open mutant's diff; 1 when there is one."""
    results = subprocess.run([_mutmut(), "results"], cwd=dest, capture_output=True, text=True).stdout
    names = open_mutants(results, equivalents())
    for name in names:
        print(subprocess.run([_mutmut(), "show", name], cwd=dest, capture_output=True, text=True).stdout.rstrip())
    print(f"{len(names)} open mutant(s) (neither killed nor recorded in {EQUIVALENTS.relative_to(ROOT)})")
    return 1 if names else 0


def _try(dest: Path, group: dict[str, list[str]], name: str, tests: list[str]) -> int:
    """Run ``tests`` (default: the group's) on mutant ``name`` in mutmut's copy; 0 when a test
    kills it, 1 when it survives them (a new test is tried without a whole run)."""
    if not (dest / "mutants").is_dir():
        print(f"mutation.py: no mutants yet in {dest.relative_to(ROOT)}: run the group first", file=sys.stderr)
        return 2
    env = {**os.environ, "MUTANT_UNDER_TEST": name}
    rc = subprocess.call([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                          *group.get("pytest_args", []), *(tests or group["tests"])], cwd=dest / "mutants", env=env)
    print(f"{name}: {'killed' if rc == 1 else 'survived' if rc == 0 else f'pytest exit {rc}'}")
    return 0 if rc == 1 else 1


def _mutmut() -> str:
    exe = Path(sys.executable).with_name("mutmut")
    found = str(exe) if exe.exists() else shutil.which("mutmut")
    if not found:
        sys.exit("mutmut is not installed: pip install mutmut (3.x)")
    return found


def main(argv: list[str]) -> int:
    all_groups = groups()
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        print("\ngroups: " + ", ".join(all_groups))
        return 0 if argv else 2
    if argv[0] == "list":
        for name, g in all_groups.items():
            print(f"{name}:\n  modules: {' '.join(g['modules'])}\n  tests:   {' '.join(g['tests'])}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in all_groups:
        print(f"mutation.py: no group {name!r} (groups: {', '.join(all_groups)})", file=sys.stderr)
        return 2
    group = all_groups[name]
    dest = WORK / name
    if "--fresh" in rest:
        rest = [a for a in rest if a != "--fresh"]
        shutil.rmtree(dest, ignore_errors=True)
    if not rest:
        rest = ["run"]
    if rest[0] == "run" and not any(a.startswith("--max-children") for a in rest):
        rest = ["run", "--max-children", "1", *rest[1:]]
    files = _tracked()
    top = sorted({p.split("/", 1)[0] for p in files} - {"pyproject.toml"})
    dest.mkdir(parents=True, exist_ok=True)
    _sync(dest, [p for p in files if p != "pyproject.toml"], group["modules"])
    (dest / "pyproject.toml").write_text(_pyproject(_section(group, top)), "utf-8")
    if rest == ["open"]:
        return _open(dest)
    if rest[0] == "try" and len(rest) >= 2:
        return _try(dest, group, rest[1], rest[2:])
    return subprocess.call([_mutmut(), *rest], cwd=dest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
