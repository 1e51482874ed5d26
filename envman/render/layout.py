"""A :class:`~envman.render.sections.DockerfilePlan` laid out as Dockerfile steps.

:mod:`envman.render.plan` decides what an image holds (which packages, pins, flags, mounts and
quoted values); this module decides how the Dockerfile says it: which instructions, in which
order, with which comments, and which shell commands each ``RUN`` chains. It returns a tuple of
:mod:`envman.render.steps` steps, which the templates print one per line; every branch (classic
builder or BuildKit, pip or uv, apt's Python or python-build-standalone, a wheelhouse or none) is
taken here, in Python. A stack image's steps, in cache-friendly layer order:

    FROM -> build defaults -> (CA bundle) -> OS packages -> (trust store, indexes, wheelhouse)
         -> Python -> (wheelhouse) -> (CUDA libraries) -> framework -> (NVIDIA runtime)
         -> envman's files, labels

A project image or the notebook layer: FROM, USER root, its apt packages, then its pip packages
or its requirements. The plan holds argument lists and values as they are; they are quoted here,
as each line is written (:func:`envman.render.quote.sh_word` for /bin/sh,
:func:`envman.render.quote.dockerfile_quote` for ENV and LABEL). Standard library only: the run
path lays project images out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envman.render.mountpoints import MOUNT_POINTS_FILE
from envman.render.imagepaths import CA_CONTEXT_FILE, CA_MERGED, PIP_CACHE, SETTLED_DIRS, SETTLED_TIME, SYSTEM_CA
from envman.render.quote import dockerfile_quote, sh_double_quoted, sh_word, sh_words
from envman.render.steps import (
    AddStep, ArgStep, Command, Comment, CopyStep, EnvStep, ExecStep, FromStep, If, LabelStep, BuildMount, OrElse, RunStep, Step,
    UserStep, paragraphs,
)

if TYPE_CHECKING:
    from envman.render.sections import (
        BaseImage, BuilderOptions, CudaLibs, DockerfilePlan, Framework, NetworkOptions, OsPackages, Python,
        UvInstaller, Wheelhouse,
    )

#: The template of any layer on an envman image (a project's image, the notebook layer).
PROJECT_TEMPLATE = "project.Dockerfile.j2"


def dockerfile_steps(plan: DockerfilePlan) -> tuple[Step, ...]:
    """Every instruction of ``plan``'s Dockerfile, in order (the render-hash label excepted: it is
    appended once the hash of everything else is known)."""
    if plan.template == PROJECT_TEMPLATE:
        return _layer_steps(plan)
    return _stack_steps(plan)


# --- shared pieces -----------------------------------------------------------------------------


def _pip_install(python: str, options: tuple[str, ...]) -> str:
    return f"{python} -m pip install {sh_words(options)}"


def _assignments(env: tuple[tuple[str, str], ...]) -> str:
    """``NAME=value`` words for /bin/sh, space-separated."""
    return " ".join(f"{k}={sh_word(v)}" for k, v in env)


def _env(env: tuple[tuple[str, str], ...]) -> EnvStep:
    """An ENV instruction, its values quoted for the Dockerfile lexer."""
    return EnvStep(tuple(f"{k}={dockerfile_quote(v)}" for k, v in env))


def _apt_install(os: OsPackages) -> str:
    prefix = "".join(f"{a} " for a in [_assignments(os.install_env)] if a)
    return f"{prefix}{sh_words(os.apt_get)} install -y --no-install-recommends {' '.join(os.packages)}"


def _from(base: BaseImage) -> FromStep:
    return FromStep(base.from_image, platform=base.platform)


# --- a project image, the notebook layer -------------------------------------------------------


def _layer_steps(plan: DockerfilePlan) -> tuple[Step, ...]:
    steps: list[Step] = [Comment(plan.title), _from(plan.base), UserStep("root")]
    b, net, os = plan.builder, plan.network, plan.os_packages
    networked = b.step_setup or (os is not None and os.mirror is not None)
    if net is not None and net.ca_copy_dest:
        steps += [Comment(("--ca-bundle: your PEM bundle, merged with the system store for each step below",
                           "(apt, pip) and removed at its end; the system store itself is left as it is.")),
                  CopyStep((CA_CONTEXT_FILE,), net.ca_copy_dest)]

    def run(commands: list[Command]) -> RunStep:
        # without network options the bytes stay as they always were: their hash is the image's tag
        if networked:
            return RunStep(_with_ca(b, list(commands)))
        return RunStep(tuple(commands), chain="and-leading")

    if os is not None:
        steps.append(run([*_apt_mirror(os.mirror), f"{sh_words(os.apt_get)} update", _apt_install(os),
                          "rm -rf /var/lib/apt/lists/*"]))
    pip = plan.pip_packages
    if pip is not None:
        install = f"{_pip_install(pip.python, pip.pip_options)} {' '.join(sh_double_quoted(r) for r in pip.requirements)}"
        steps.append(RunStep(_with_ca(b, [install])) if networked else RunStep((install,)))
    req = plan.project.requirements if plan.project is not None else None
    if req is not None:
        install = f"{_pip_install(req.python, req.pip_options)} {sh_words(req.install)}"
        steps += [CopyStep(req.copy, req.dest), run([install, *([sh_words(req.check)] if req.check else [])])]
    return tuple(steps)


def _apt_mirror(mirror: str | None) -> list[Command]:
    """--apt-mirror: the commands that point apt's sources at ``mirror`` (none without one)."""
    if not mirror:
        return []
    return ["if [ -f /etc/apt/sources.list ]; then sed -i -E "
            f"'/^[[:space:]]*deb(-src)?[[:space:]]/ s#https?://[^[:space:]]+#{mirror}#' /etc/apt/sources.list; fi",
            'for f in /etc/apt/sources.list.d/*.sources; do if [ -e "$f" ]; then sed -i -E '
            f"'/^URIs:/ s#https?://[^[:space:]]+#{mirror}#g' \"$f\"; fi; done"]


# --- a stack image -----------------------------------------------------------------------------


def _stack_steps(plan: DockerfilePlan) -> tuple[Step, ...]:
    b, net, py, fw, files = plan.builder, plan.network, plan.python, plan.framework, plan.envman_files
    if plan.os_packages is None or net is None or py is None or fw is None or files is None:
        raise TypeError("a stack image's plan has OS packages, network options, Python, a framework and envman's files")
    wh = plan.wheelhouse
    nvidia = plan.nvidia
    return paragraphs(
        _head(plan.title, b, plan.base),
        [Comment(("Build-time only (an ARG, unlike ENV, does not persist): no debconf prompts.",)),
         ArgStep("DEBIAN_FRONTEND", "noninteractive"),
         EnvStep(("LANG=C.UTF-8", "PIP_DISABLE_PIP_VERSION_CHECK=1"))],
        _mount_points(b),
        _ca_copy(net),
        _os_packages(plan.os_packages, b),
        _trust_store(net),
        _indexes(net, b),
        _wheelhouse_copy(wh, "before-python"),
        _python(py, b),
        _wheelhouse_copy(wh, "after-python"),
        _cuda_libs(plan.cuda_libs, py, b),
        _framework(fw, py, b),
        [Comment(("4. What the NVIDIA container runtime reads (overriding the base image's values consistently;",
                  "constraint syntax: https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html).",
                  nvidia.note)),
         _env(nvidia.env)] if nvidia is not None else [],
        [Comment(("envman's own files: the entrypoint, the smoke-test probe and the stack this image was built for.",)),
         CopyStep(files.files, f"{files.dir}/"),
         EnvStep((f"HOME={files.home}",)),
         ExecStep("ENTRYPOINT", (files.entrypoint,)),
         ExecStep("CMD", (files.cmd,)),
         LabelStep(tuple(f"{label.name}={dockerfile_quote(label.value)}" for label in plan.labels))],
    )


def _head(title: tuple[str, ...], b: BuilderOptions, base: BaseImage) -> list[Step]:
    lines = list(title)
    if b.buildkit:
        lines += ["Builder: BuildKit. Caches for apt, pip and uv live in cache mounts; the wheelhouse, the CA",
                  "bundle and index credentials are mounted into the RUN steps that use them, never copied."]
    if base.rebuilt:
        lines += [f"Base image {base.image}: NVIDIA no longer serves it, so envman rebuilds it from NVIDIA's",
                  f"recipe (base/Dockerfile in this context) as {base.from_image}, built once and shared."]
    elif base.from_image != base.image:
        lines.append(f"Base image {base.image}, pulled through the registry mirror (--registry-mirror).")
    if base.platform:
        lines.append(f"Built for {base.platform}: the base image's manifest entry for that platform.")
    return [Comment(tuple(lines)), _from(base)]


def _mount_points(b: BuilderOptions) -> list[Step]:
    if not b.buildkit:
        return []
    return [Comment(("The mount points of every RUN step below (BuildKit's /etc/hosts and /etc/resolv.conf, the cache",
                     "and bind mounts' targets): empty, with one time. BuildKit 0.8 makes a stub for a missing one and",
                     "removes it after the step, leaving its folder with that time in the step's layer; with these in",
                     "place the Python and CUDA-library layers are the same bytes wherever they are built.")),
            AddStep(MOUNT_POINTS_FILE, "/")]


def _ca_copy(net: NetworkOptions) -> list[Step]:
    if not net.ca_copy_dest:
        return []
    return [Comment(("--ca-bundle: your PEM bundle, for builds behind a TLS-intercepting proxy. apt needs HTTPS",
                     "before ca-certificates is installed, so apt reads this file directly (Acquire::https::CAInfo);",
                     "afterwards update-ca-certificates adds it to the system store that pip and uv are pointed at.")),
            CopyStep((CA_CONTEXT_FILE,), net.ca_copy_dest)]


_SET_ASIDE = "/etc/apt/envman-set-aside"


def _os_packages(os: OsPackages, b: BuilderOptions) -> list[Step]:
    lines = ["1. OS packages."]
    commands: list[Command] = ["set -eu"]
    if os.hide_nvidia_sources:
        lines += ["NVIDIA's CUDA apt repository is set aside while envman's apt-get runs and put back after:",
                  "nothing is installed from it, and images made before NVIDIA's 2022 key rotation cannot",
                  "`apt-get update` with it (https://forums.developer.nvidia.com/t/notice-cuda-linux-repository-key-rotation/212772)."]
        commands += [f"mkdir -p {_SET_ASIDE}",
                     "for f in /etc/apt/sources.list.d/cuda* /etc/apt/sources.list.d/nvidia-ml*; do "
                     f'if [ -e "$f" ]; then mv "$f" {_SET_ASIDE}/; fi; done']
    if os.mirror:
        lines += ["--apt-mirror: the URI of every `deb` line in /etc/apt/sources.list and of every `URIs:` line",
                  "in /etc/apt/sources.list.d/*.sources (deb822) becomes the mirror; it stays so in the image."]
        commands += _apt_mirror(os.mirror)
    lines += [f"{os.home} (1777) and group/world-writable /etc/passwd and /etc/group let the entrypoint run",
              "the image as any host uid:gid. This grants nothing: envman runs containers with",
              "no-new-privileges, so a passwd entry cannot be turned into privileges (no setuid su/sudo)."]
    if b.buildkit:
        lines += ["apt's package lists and downloads stay in cache mounts per OS release (locked: one build at a",
                  "time writes them); /etc/apt is left as the base image has it."]
    commands += [f"{sh_words(os.apt_get)} update", _apt_install(os)]
    if os.update_ca_certificates:
        commands.append("update-ca-certificates")
    if os.hide_nvidia_sources:
        commands += [f'for f in {_SET_ASIDE}/*; do if [ -e "$f" ]; then mv "$f" /etc/apt/sources.list.d/; fi; done',
                     f"rmdir {_SET_ASIDE}"]
    if os.clean_lists:
        commands.append("rm -rf /var/lib/apt/lists/*")
    commands += [f"mkdir -p {os.home}", f"chmod 1777 {os.home}", "chmod go+w /etc/passwd /etc/group"]
    return [Comment(tuple(lines)), RunStep(tuple(commands), os.mounts)]


def _trust_store(net: NetworkOptions) -> list[Step]:
    if not net.ca_env:
        return []
    return [Comment(("Everything below trusts the system store, which now holds your CA bundle too.",)),
            _env(net.ca_env)]


def _indexes(net: NetworkOptions, b: BuilderOptions) -> list[Step]:
    if not net.pip_env:
        return []
    if b.buildkit:
        lines = ("--pip-index / --pip-extra-index, without credentials (those are a build secret). They stay in",
                 "the image, so pip inside the container uses your index too.")
    else:
        lines = ("--pip-index / --pip-extra-index (no credentials: rejected before rendering). They stay in the",
                 "image, so pip inside the container uses your index too.")
    return [Comment(lines), _env(net.pip_env)]


def _wheelhouse_copy(wh: Wheelhouse | None, when: str) -> list[Step]:
    if wh is None or wh.copy != when:
        return []
    if when == "before-python":
        lines = ("--wheelhouse (with --offline: copied before Python, whose pip steps install from it too).",
                 "The wheels stay in this layer of the image; that is the price of the classic builder.")
    else:
        lines = ("--wheelhouse: copied after Python so that new wheels do not rebuild it. The wheels stay in",
                 "this layer of the image; that is the price of the classic builder.")
    return [Comment(lines), CopyStep(("wheels/",), f"{wh.dir}/")]


def _with_ca(b: BuilderOptions, commands: list[Command]) -> tuple[Command, ...]:
    """``set -eu``, the CA bundle's merge and the step's variables (BuildKit with --ca-bundle, a
    layer's network options), ``commands``, the merged bundle's removal."""
    setup = []
    if b.ca_source is not None:
        setup.append(f"{{ cat {SYSTEM_CA} 2>/dev/null || true; cat {b.ca_source}; }} > {CA_MERGED}")
    if b.step_env:
        setup.append(f"export {_assignments(b.step_env)}")
    return ("set -eu", *(["; ".join(setup)] if setup else []), *commands,
            *([f"rm -f {CA_MERGED}"] if b.ca_source is not None else []))


#: Starts a reproducible step: a second before it starts (the kernel stamps files with a clock that
#: may lag the one ``date`` reads by a tick), and SOURCE_DATE_EPOCH, which makes Python's bytecode
#: compiler write hash-checked .pyc files (PEP 552) that carry no file times.
_SETTLE_START = f'settled="$(($(date +%s) - 1))"; export SOURCE_DATE_EPOCH={SETTLED_TIME} PYTHONDONTWRITEBYTECODE=1'
def _settle_end(mounts: tuple[BuildMount, ...]) -> str:
    """Ends it: every file and folder the step wrote or changed gets the same time, so that the
    layer's bytes depend only on what was installed (a layer's tar carries each entry's modification
    time; the entries themselves are in path order, their other times left out). The step's own
    mounts under those folders (the wheelhouse, a netrc secret: read-only, and not in the layer)
    are passed over: ``-xdev`` keeps find out of them, not off their mount points."""
    skip = sorted(m.target for m in mounts if any(m.target == d or m.target.startswith(d + "/") for d in SETTLED_DIRS))
    prune = "".join(f"-path {sh_word(t)} -prune -o " for t in skip)
    return (f'for d in {" ".join(SETTLED_DIRS)}; do if [ -d "$d" ]; then '
            f'find "$d" -xdev {prune}-newermt "@$settled" -exec touch -h -d @{SETTLED_TIME} {{}} +; fi; done')


def _settled(commands: tuple[Command, ...], mounts: tuple[BuildMount, ...]) -> tuple[Command, ...]:
    """``commands`` (which start with ``set -eu``) as a reproducible step: see :data:`_SETTLE_START`.
    Proven on both builders (tests/docker/test_reproducible_layers.py); on BuildKit with the
    mount points' layer (:func:`_mount_points`), without which BuildKit before 0.11 leaves the
    folders of the stubs it made for a step's mount points with the time it removed them."""
    return (commands[0], _SETTLE_START, *commands[1:], _settle_end(mounts))


def _python(py: Python, b: BuilderOptions) -> list[Step]:
    lines = [f"Note: {py.pip_note}."] if py.pip_note else []
    if py.strategy == "apt":
        lines += [f"2. Python {py.version} from the distribution (installed above as {py.exe}), in a venv at",
                  f"{py.venv} with --system-site-packages: pip refuses `pip install --user` in a venv without",
                  "system site packages, and users of this image may want exactly that."]
        commands: list[Command] = [f"{py.exe} -m venv --system-site-packages {py.venv}"]
    else:
        lines += [f"2. Python {py.version}, which {py.os} does not package: python-build-standalone, installed by",
                  "uv. uv comes as its PyPI wheel (a static binary inside), pip-installed with the distribution's",
                  "python3 into a throwaway bootstrap venv, so it travels through the same index, CA bundle and",
                  "wheelhouse settings as every other package; --ignore-requires-python because the wheel's",
                  "Python floor concerns its Python shim, not the binary, and old distributions ship an older",
                  "python3. `uv python install` honours UV_PYTHON_INSTALL_MIRROR (--python-mirror) for sites that",
                  f"cannot reach the python-build-standalone releases. The venv at {py.venv} has",
                  "--system-site-packages so that `pip install --user` works in it."]
        bootstrap_pip = _pip_install(py.bootstrap_python, b.pip_cache)
        uv = f"{py.bootstrap}/bin/uv"
        flags = "".join(f"{sh_word(w)} " for w in py.bootstrap_flags)
        uv_env = _assignments(py.uv_env)
        commands = [f"python3 -m venv {py.bootstrap}",
                    *([f"{bootstrap_pip} {flags}--upgrade {sh_word(py.bootstrap_pip)}"] if py.bootstrap_pip else []),
                    f"{bootstrap_pip} --no-compile --ignore-requires-python {flags}{sh_word(py.uv_requirement)}",
                    f"{uv_env} {uv} python install --no-bin {py.version}",
                    f'"$({uv_env} {uv} python find --managed-python {py.version})" -m venv --system-site-packages {py.venv}',
                    f"rm -rf {py.bootstrap} /tmp/envman-uv-cache"]
    if py.pip_upgrade:
        commands.append(f"{_pip_install(py.venv_python, b.pip_cache)} {sh_words(py.pip_upgrade)}")
    else:
        commands.append(f"{py.venv_python} -m pip --version")
    lines += ["The files this step writes all get one time, and from Python 3.7 on its .pyc files are",
              "hash-checked (PEP 552: they carry no time): the same Python and pip give the same layer."]
    return [Comment(tuple(lines)), RunStep(_settled(_with_ca(b, commands), py.mounts), py.mounts),
            EnvStep((f"VIRTUAL_ENV={py.venv}", f"PATH={py.venv}/bin:$PATH"))]


def _cuda_libs(cl: CudaLibs | None, py: Python, b: BuilderOptions) -> list[Step]:
    if cl is None:
        return []
    lines: tuple[str, ...] = (f"The CUDA libraries that {cl.title} pins exactly, in a layer of their own before it:",
                             "every stack with the same pins (on the same OS and Python) shares this layer. Exactly these",
                             "wheels, no dependencies (the framework step adds the rest), no bytecode, one time on every",
                             "file: the same pins give the same layer digest wherever they are built.")
    install = f"{_pip_install(py.venv_python, b.pip_cache)} {sh_words(cl.pip_args)}"
    if cl.requirements_file is None:
        return [Comment(lines), RunStep(_settled(_with_ca(b, [install]), cl.mounts), cl.mounts)]
    lines += ("pip runs in hash-checking mode: every wheel, downloaded, mirrored or from a cache, must have",
              "one of the sha256 hashes the matrix row records for it.")
    fetch: Command = install
    if cl.store_args:
        lines += ("The wheels come from envman's wheel store when its build serves them (checked against the",
                  "same hashes there and here), else from the index.")
        fetch = OrElse(f"{_pip_install(py.venv_python, b.pip_cache)} {sh_words(cl.store_args)}", (install,))
    elif b.buildkit and "--no-index" not in cl.pip_args:
        lines += ("The wheels are kept in pip's cache mount, which every build on this engine shares, whatever",
                  "the index's cache headers say, in:",
                  f"{CUDA_WHEELS}. Installed from there when all are there; else",
                  "downloaded into a folder of this build's own and moved in (a rename: a concurrent build sees a",
                  "whole wheel or none), then installed from there.")
        fetch = _kept_wheels(cl, py, b)
    commands: list[Command] = [f"printf '%s\\n' {sh_words(cl.requirements)} > {cl.requirements_file}", fetch,
                               f"rm -f {cl.requirements_file}"]
    return [Comment(lines), RunStep(_settled(_with_ca(b, commands), cl.mounts), cl.mounts)]


#: BuildKit: where the CUDA-library step keeps the pinned wheels, in pip's cache mount.
CUDA_WHEELS = f"{PIP_CACHE}/envman-cuda-wheels"


def _kept_wheels(cl: CudaLibs, py: Python, b: BuilderOptions) -> Command:
    """Install the hashed pins from :data:`CUDA_WHEELS` alone, or download the pins (through the
    step's index options) into a private folder there, move them in, and install from there."""
    local = (f"{_pip_install(py.venv_python, b.pip_cache)} --require-hashes --no-deps --only-binary=:all: --no-compile "
             f"--no-index --find-links {CUDA_WHEELS} -r {cl.requirements_file}")
    download = f"{py.venv_python} -m pip download {sh_words((*b.pip_cache, *(a for a in cl.pip_args if a != '--no-compile')))}"
    return OrElse(local, (f"mkdir -p {CUDA_WHEELS}", f't="$(mktemp -d {CUDA_WHEELS}.XXXXXX)"',
                          f'{download} -d "$t" || {{ rm -rf "$t"; exit 1; }}',
                          f'mv -f "$t"/*.whl {CUDA_WHEELS}/', 'rmdir "$t"', local))


def _uv_fetch(uv: UvInstaller, pip: str) -> list[Command]:
    """uv into its cache mount, once (pip fetches it; a failed fetch leaves ``$uv`` missing)."""
    fetch = "".join(f"{sh_word(w)} " for w in uv.fetch_flags)
    return [f"uv={uv.tool}/bin/uv",
            If('[ ! -x "$uv" ]', (
                f't="$(mktemp -d {uv.tool}.XXXXXX)"',
                If(f'{pip} --quiet --no-deps --only-binary=:all: --target "$t" {fetch}{sh_word(uv.requirement)}',
                   (f'mv -T "$t" {uv.tool} 2>/dev/null || rm -rf "$t"',),
                   ('rm -rf "$t"',)),
            ))]


def _framework(fw: Framework, py: Python, b: BuilderOptions) -> list[Step]:
    pip = _pip_install(py.venv_python, b.pip_cache)
    wheels = f"--no-index --no-deps {sh_words(fw.wheel_paths)}"
    if not b.buildkit:
        lines = [f"3. {fw.title}: the matrix's pinned packages."]
        if fw.wheel_paths:
            lines = [f"3. {fw.title}: the matrix's pinned packages, the wheelhouse first (each wheel as it is, no",
                     "dependencies; the pins below then find them already satisfied)."]
        return [Comment(tuple(lines)),
                RunStep(("set -eu", *([f"{pip} {wheels}"] if fw.wheel_paths else []), f"{pip} {sh_words(fw.pip_args)}"))]
    uv = fw.uv if fw.installer == "uv" else None
    if uv is not None:
        lines = [f"3. {fw.title}, installed by uv {uv.version}, which is kept in a cache mount of its",
                 "own (fetched once, by pip, through the same index, CA bundle and wheelhouse settings; pip does",
                 "the work when uv cannot be fetched). Bytecode is compiled at install, as pip does: containers",
                 "run as the host user cannot write __pycache__ into the venv."]
    else:
        lines = [f"3. {fw.title}, installed by pip (uv serves Python 3.8 and newer only), with pip's",
                 "cache in a cache mount."]
    steps: list[Step] = []
    if fw.wheel_paths:
        lines += ["The wheelhouse first, each wheel as it is (no dependencies), in a layer of its own: it is",
                  "rebuilt only when the wheelhouse changes, not when a pin below does."]
        steps.append(Comment(tuple(lines)))
        lines = []
        if uv is not None:
            uv_env = f"UV_CACHE_DIR={uv.cache} UV_LINK_MODE=copy UV_COMPILE_BYTECODE=1 UV_PYTHON={py.venv_python}"
            steps.append(RunStep(_with_ca(b, [*_uv_fetch(uv, pip), If('[ -x "$uv" ]', (
                f'{uv_env} "$uv" pip install {wheels}',), (f"{pip} {wheels}",))]), fw.mounts))
        else:
            steps.append(RunStep(("set -eu", f"{pip} {wheels}"), fw.mounts))
    pins = "The matrix's pinned packages" + (" (the wheelhouse's already satisfied)" if fw.wheel_paths else "") + "."
    if uv is not None:
        lines += [pins + " uv first resolves from its cache alone",
                  "(--offline: a rebuild after a pin change needs no network), then through the indexes."]
        install: list[Command] = [*_uv_fetch(uv, pip), If('[ -x "$uv" ]', (
            f"export UV_CACHE_DIR={uv.cache} UV_LINK_MODE=copy UV_COMPILE_BYTECODE=1 UV_PYTHON={py.venv_python}",
            OrElse(f'"$uv" pip install --offline {sh_words(uv.args)}',
                   ('''echo "envman: not everything is in uv's cache; resolving through the indexes" >&2''',
                    f'"$uv" pip install {sh_words(uv.args)}')),
        ), (f'echo "envman: uv {uv.version} could not be fetched from the configured index; installing with pip" >&2',
            f"{pip} {sh_words(fw.pip_args)}"))]
    else:
        lines.append(pins)
        install = [f"{pip} {sh_words(fw.pip_args)}"]
    return [*steps, Comment(tuple(lines)), RunStep(_with_ca(b, install), fw.mounts)]


__all__ = ["dockerfile_steps"]
