"""Rebuild an ``nvidia/cuda`` base NVIDIA no longer serves, from NVIDIA's own recipe.

NVIDIA deleted its end-of-life tags (every CUDA 9.0-11.3 image) but still publishes the recipe of
each (``matrices/recipes.toml``, read from its Dockerfiles). For a stack on such a base,
:func:`rebuilt_base` gives a :class:`BaseBuild`: a Dockerfile with one stage per recipe of the chain
(plain Ubuntu -> base -> runtime -> cuDNN ...), the same packages at the same versions, NVIDIA's
ENV and LABEL blocks, every direct download checked against its sha256, and NVIDIA's current
repository key checked by fingerprint and installed as a ``signed-by`` keyring (no ``apt-key``).
It is built once as ``envman/base:<nvidia tag>`` (labelled with the recipe hash) and shared by
every stack on it and every user of the engine (:mod:`envman.images.base`); the stack's
Dockerfile starts ``FROM`` that image, and its build context carries ``base/Dockerfile`` so the
render hash covers the recipe and ``envman render -o DIR`` shows everything that will be built.

``[build] base`` / ``--base`` choose: ``auto`` pulls what is served and rebuilds what is not (a
``--registry-mirror`` is taken to serve every tag: it wins), ``pull`` never rebuilds, ``rebuild``
rebuilds every ``nvidia/cuda`` base that has a recipe.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from typing import TYPE_CHECKING, Callable, cast

from envman.config import BaseMode, base_mode
from envman.errors import RenderError, UserError
from envman.render.quote import dockerfile_quote, mirror_image, sh_word
from envman.stack.names import nvidia_tag
from envman.state import BASE_REPOSITORY
from envman.render.steps import ArgStep, Comment, CopyStep, EnvStep, FromStep, LabelStep, RunStep, Step, paragraphs

if TYPE_CHECKING:
    from envman.matrix.model import BaseRecipe, Matrix
    from envman.stack.names import Stack

KEYRING = "/usr/share/keyrings/cuda-archive-keyring.gpg"
GNUPG_HOME = "/tmp/envman-gnupg"
DOWNLOADS = "/tmp/envman-downloads"
CA_FILE = "envman-ca.crt"
CA_IN_IMAGE = "/usr/local/share/ca-certificates/envman-ca.crt"
#: What the repository set-up may remove again once the key and sources are in place (NVIDIA's
#: recipes purge their fetchers the same way).
FETCHERS = ("curl", "gnupg-curl", "wget")


@dataclass(frozen=True)
class BaseBuild:
    """A rebuilt base: what to build, and under which name."""

    tag: str  # the nvidia/cuda tag it stands for
    ref: str  # envman/base:<tag>
    dockerfile: str
    recipe_hash: str  # sha256 of the Dockerfile (and the CA bundle it copies, if any)
    sources: tuple[str, ...]  # "<path> @ <commit>" of each recipe, base first
    files: tuple[tuple[str, bytes], ...] = ()  # extra context files (the CA bundle)

    @property
    def nvidia_ref(self) -> str:
        return f"nvidia/cuda:{self.tag}"

    def context(self) -> dict[str, bytes]:
        """The base's own build context (``Dockerfile`` and what it copies)."""
        return {"Dockerfile": self.dockerfile.encode(), **dict(self.files)}


#: The network options a rebuilt base has no use for: NVIDIA's recipe runs apt and curl only (no
#: pip, no Python, no framework). The others are :func:`rebuilt_base`'s keyword arguments.
BASE_UNUSED_OPTIONS = frozenset({"pip_index", "pip_extra_index", "framework_index", "wheelhouse", "offline",
                                 "python_install_mirror"})


def rebuilt_base(matrix: Matrix | Callable[[], Matrix], stack: Stack, mode: BaseMode = "auto", *,
                 registry_mirror: str | None = None, apt_mirror: str | None = None,
                 ca_bundle: Path | None = None) -> BaseBuild | None:
    """The rebuilt base ``stack`` builds on under ``mode``, or ``None`` to pull ``stack.base_image``.
    ``matrix`` may be a function that loads it: it is called only when a recipe is looked up (a
    published base under ``auto`` needs none, so a build of it need not load the matrix)."""
    mode = base_mode(mode, where="--base")
    tag = nvidia_tag(stack)
    if mode == "pull" or tag is None:
        return None
    if mode == "auto" and (registry_mirror or stack.base_image_status == "published"):
        return None
    chain = (matrix() if callable(matrix) else matrix).recipe_chain(tag, stack.platform)
    if mode == "auto":
        if chain is None:
            return None
    elif chain is None:
        raise UserError(
            f"no recipe rebuilds {stack.base_image} on {stack.platform}",
            where="--base rebuild",
            fix="use --base auto or pull (the tag is pulled), or add a [[recipe]] for it with --matrix",
        )
    return render_base(chain, registry_mirror=registry_mirror, apt_mirror=apt_mirror, ca_bundle=ca_bundle)


def base_line(stack: Stack, base: BaseBuild | None, mode: BaseMode = "auto", *, registry_mirror: str | None = None) -> str | None:
    """One line on how ``stack`` gets its base, when that is news: rebuilt from NVIDIA's recipe, or
    a tag NVIDIA no longer serves that ``--base pull`` will try to pull anyway."""
    if base is not None:
        # said before the build: whether the rebuild worked is the build's own result
        return (f"base {stack.base_image} is no longer served by NVIDIA: rebuilding it from NVIDIA's recipe as "
                f"{base.ref} (built once, then reused)")
    if mode != "pull" or registry_mirror or nvidia_tag(stack) is None or stack.base_image_status == "published":
        return None
    gone = "was deleted by NVIDIA (end of life)" if stack.base_image_status == "deleted" else "is not confirmed served"
    return (f"base {stack.base_image} {gone}: --base pull will likely fail to pull it; use --base auto to rebuild "
            "it from NVIDIA's recipe, or --registry-mirror with a registry that still has it")


def render_base(chain: tuple[BaseRecipe, ...], *, registry_mirror: str | None = None, apt_mirror: str | None = None,
                ca_bundle: Path | None = None) -> BaseBuild:
    """The Dockerfile that rebuilds ``chain[-1]`` (``chain[0]`` starts from the plain OS image)."""
    from envman.render.template import render_steps

    if not chain or chain[0].from_image is None or any(r.parent != p.tag for p, r in zip(chain, chain[1:])):
        raise RenderError("a base recipe chain must start from a plain OS image and follow each parent",
                          fix="check the recipes' parent keys (matrices/README.md)")
    ca = ca_bundle.read_bytes() if ca_bundle is not None else None
    top = chain[-1]
    title = (
        f"nvidia/cuda:{top.tag}, rebuilt by envman from NVIDIA's recipes: NVIDIA no longer serves the tag.",
        *(f"  {r.tag}: {r.path} @ {r.commit[:12]}" for r in chain),
        "Changed from the recipes as written: NVIDIA's current repository key (rotated in 2022), checked by",
        "fingerprint and installed as a signed-by keyring (no apt-key); downloads fetched with curl.",
    )
    text = render_steps("base.Dockerfile.j2", paragraphs(
        [Comment(title)], *(_stage(chain, i, registry_mirror, apt_mirror, ca is not None) for i in range(len(chain)))))
    files = ((CA_FILE, ca),) if ca is not None else ()
    digest = hashlib.sha256(text.encode() + b"".join(b"\0" + n.encode() + b"\0" + d for n, d in files)).hexdigest()
    return BaseBuild(tag=top.tag, ref=f"{BASE_REPOSITORY}:{top.tag}", dockerfile=text, recipe_hash=digest,
                     sources=tuple(f"{r.path} @ {r.commit}" for r in chain), files=files)


def _stage(chain: tuple[BaseRecipe, ...], i: int, registry_mirror: str | None, apt_mirror: str | None,
           ca: bool) -> list[Step]:
    """One stage of the chain: ``chain[i]``'s recipe on the stage before it (the first: on the
    plain OS image, with apt's set-up and the CA bundle)."""
    recipe = chain[i]
    first = i == 0
    # the chain's first recipe starts from the plain OS image (load.py: exactly one of from, parent)
    image = mirror_image(cast(str, recipe.from_image), registry_mirror) if first else _stage_name(chain[i - 1])
    steps: list[Step] = [Comment(_stage_comments(recipe)), FromStep(image, stage=_stage_name(recipe))]
    if first:
        steps.append(ArgStep("DEBIAN_FRONTEND", "noninteractive"))
        if ca:
            steps += [Comment(("--ca-bundle: the certificates this site's TLS needs, for curl and apt while the base is built.",)),
                      CopyStep((CA_FILE,), CA_IN_IMAGE)]
    if recipe.env:
        steps.append(EnvStep(tuple(_env(k, v) for k, v in recipe.env)))
    if recipe.labels:
        steps.append(LabelStep(tuple(f"{_label_key(k)}={dockerfile_quote(v, what=f'recipe label {k}')}"
                                     for k, v in recipe.labels)))
    steps += [RunStep(tuple(lines), chain="and") for lines in _runs(recipe, first, apt_mirror, ca) if lines]
    return steps


def _stage_name(recipe: BaseRecipe) -> str:
    return "cuda-" + recipe.tag.replace(".", "-")


def _stage_comments(recipe: BaseRecipe) -> tuple[str, ...]:
    out = [f"{recipe.tag}: {recipe.path} @ {recipe.commit[:12]} of NVIDIA's repository"]
    for line in recipe.omitted:
        out.append(f"not carried over (NVIDIA's own entrypoint and licence file): {line}")
    if recipe.os_archive_status != "confirmed" and recipe.from_image:
        out.append(f"where {recipe.from_image}'s packages are now is {recipe.os_archive_status}: see `envman matrix show`")
    return tuple(out)


def _env(key: str, value: str) -> str:
    quoted = dockerfile_quote(value, what=f"recipe ENV {key}")
    for ref in ("PATH", "LD_LIBRARY_PATH"):  # the parent's value, expanded by Docker
        quoted = quoted.replace("\\${" + ref + "}", "${" + ref + "}")
    return f"{key}={quoted}"


def _label_key(key: str) -> str:
    return key


def _apt(ca: bool) -> str:
    return f"apt-get -o Acquire::https::CAInfo={CA_IN_IMAGE}" if ca else "apt-get"


def _runs(recipe: BaseRecipe, first: bool, apt_mirror: str | None, ca: bool) -> list[list[str]]:
    apt = _apt(ca)
    runs: list[list[str]] = []
    if first:
        runs.append(_repository_setup(recipe, apt, apt_mirror, ca))
    if recipe.downloads:
        curl = "curl -fsSL" + (f" --cacert {CA_IN_IMAGE}" if ca else "")
        lines = [f"{apt} update", f"{apt} install -y --no-install-recommends curl ca-certificates",
                 f"mkdir -p {DOWNLOADS}"]
        for d in recipe.downloads:
            path = f"{DOWNLOADS}/{d.file}"
            lines.append(f"{curl} -o {sh_word(path)} {sh_word(d.url)}")
            lines.append(f"echo {sh_word(d.sha256 + '  ' + path)} > {sh_word(path + '.sha256')}")
            lines.append(f'{{ sha256sum -c --strict {sh_word(path + ".sha256")} || '
                         f'{{ echo "envman: {d.file} does not match the sha256 NVIDIA\'s recipe gives ({d.sha256[:16]}...): '
                         f'refusing it" >&2; exit 1; }}; }}')
            lines.append(f"dpkg -i {sh_word(path)}")
        lines += ["apt-get purge --autoremove -y curl", f"rm -rf {DOWNLOADS} /var/lib/apt/lists/*"]
        runs.append(lines)
    install = [f"{apt} update", f"{apt} install -y --no-install-recommends " + " ".join(sh_word(p) for p in recipe.packages)] \
        if recipe.packages else []
    if install or recipe.symlinks:
        lines = [*install]
        lines += [f"ln -s {sh_word(target)} {sh_word(link)}" for target, link in recipe.symlinks]
        if install:
            lines.append("rm -rf /var/lib/apt/lists/*")
        runs.append(lines)
    if recipe.hold:
        runs.append(["apt-mark hold " + " ".join(sh_word(h) for h in recipe.hold)])
    if recipe.ld_so_conf:
        runs.append([f"echo {sh_word(p)} >> /etc/ld.so.conf.d/nvidia.conf" for p in recipe.ld_so_conf])
    return runs


def _repository_setup(recipe: BaseRecipe, apt: str, apt_mirror: str | None, ca: bool) -> list[str]:
    """NVIDIA's apt repositories, signed by its current key, checked by fingerprint."""
    assert recipe.key_url and recipe.key_fingerprint
    lines: list[str] = []
    if apt_mirror:
        lines.append(f"sed -i -E '/^[[:space:]]*deb(-src)?[[:space:]]/ s#https?://[^[:space:]]+#{apt_mirror}#' "
                     "/etc/apt/sources.list")
    setup = list(dict.fromkeys([*recipe.setup_packages, "curl", "gnupg" if "gnupg2" not in recipe.setup_packages else "gnupg2"]))
    if "gnupg-curl" in setup:  # Ubuntu 16.04: gnupg-curl brings gnupg 1.4's gpg
        setup.remove("gnupg")
    curl = "curl -fsSL" + (f" --cacert {CA_IN_IMAGE}" if ca else "")
    fpr = recipe.key_fingerprint
    gpg = f"gpg --homedir {GNUPG_HOME} --batch"
    lines += [
        f"{apt} update",
        f"{apt} install -y --no-install-recommends " + " ".join(sh_word(p) for p in setup),
        f"mkdir -m 700 {GNUPG_HOME}",
        f"{curl} -o {GNUPG_HOME}/key.pub {sh_word(recipe.key_url)}",
        f"{gpg} --import {GNUPG_HOME}/key.pub",
        f"{gpg} --with-colons --fingerprint > {GNUPG_HOME}/fingerprints",
        f'fpr="$(awk -F: \'$1 == "fpr" {{ print $10; exit }}\' {GNUPG_HOME}/fingerprints)"',
        f'{{ [ "$fpr" = {fpr} ] || {{ echo "envman: the key at {recipe.key_url} has fingerprint $fpr, '
        f'not NVIDIA\'s {fpr}: refusing it" >&2; exit 1; }}; }}',
        f"{gpg} --export {fpr} > {KEYRING}",
    ]
    for i, repo in enumerate(recipe.repositories):
        name = "cuda.list" if i == 0 else "nvidia-ml.list" if "machine-learning" in repo else f"nvidia-{i}.list"
        lines.append(f"echo {sh_word(f'deb [signed-by={KEYRING}] {repo} /')} > /etc/apt/sources.list.d/{name}")
    purge = [p for p in setup if p in FETCHERS]
    if purge:
        lines.append("apt-get purge --autoremove -y " + " ".join(purge))
    lines.append(f"rm -rf {GNUPG_HOME} /var/lib/apt/lists/*")
    return lines


__all__ = ["BASE_UNUSED_OPTIONS", "BASE_REPOSITORY", "BaseBuild", "base_line", "rebuilt_base", "nvidia_tag", "render_base"]
