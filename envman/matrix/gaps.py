"""What the matrix lacks that the index shows, for ``envman matrix update``: CUDA releases
(``cuda-toolkit``) the matrix has no release of, facts of its releases it cannot fill, a stale GPU
list, and Pythons the index serves that a row does not list."""

from __future__ import annotations

import datetime as _dt
from typing import Mapping

from packaging.version import Version

from envman.matrix.index import NotFound
from envman.matrix.model import Matrix
from envman.matrix.update import IndexReader, upload_day, final_version
from envman.matrix.wheels import pythons, wheels


# --- CUDA releases and the GPU list ------------------------------------------------------------

#: The PyPI project whose releases are CUDA's (``cuda-toolkit 13.4.2`` is CUDA 13.4.2).
CUDA_PROJECT = "cuda-toolkit"
#: Days after which the GPU list, compared with NVIDIA's CUDA GPUs pages on its ``checked`` date, is stale.
GPU_LIST_MAX_AGE = 180


def cuda_versions(ctx: IndexReader) -> dict[Version, str | None]:
    """CUDA releases on the index (``X.Y.Z``; a fourth part is a repackaging) -> first upload day."""
    out: dict[Version, str | None] = {}
    for f in ctx.files(CUDA_PROJECT):
        v = final_version(f.filename.split("-")[1])  # ctx.files: wheels named cuda_toolkit-VERSION-...
        if v is None or len(v.release) < 3:
            continue
        v = Version(".".join(str(p) for p in v.release[:3]))
        day = upload_day(f.upload_time)
        seen = out.get(v)
        if v not in out or (day and (seen is None or day < seen)):
            out[v] = day
    return out


def cuda_report(matrix: Matrix, versions: Mapping[Version, str | None]) -> tuple[list[str], list[str]]:
    """(CUDA releases the matrix lacks, what the matrix cannot fill for the releases it has): a
    release's own toolkit driver (each update has one: NVIDIA's table, not the index) and nvidia/cuda
    images of it. Nothing is guessed; every line says where the fact would come from."""
    new: list[str] = []
    unfilled: list[str] = []
    for v in sorted(versions):
        rel = matrix.cuda_release(v)
        when = f" (released {versions[v]})" if versions[v] else ""
        if rel is None:
            new.append(str(v))
            unfilled.append(f"CUDA {v}{when}: no [[release]] {v.major}.{v.minor} in cuda.toml: its toolkit driver "
                            "(NVIDIA's release notes, Table 3), nvcc's compute capabilities and images are not known")
            continue
        ga = v.micro == 0 or (not any(u <= v for u, _ in rel.updates) and v == min(x for x in versions if (x.major, x.minor) == (v.major, v.minor)))
        if not ga and v not in {u for u, _ in rel.updates}:
            unfilled.append(f"CUDA {v}{when}: no toolkit driver recorded for this update (updates of cuda.toml "
                            f"{rel.key}); stacks on its images use {rel.toolkit_driver_for(v)}, a lower bound")
        newest = v == max(x for x in versions if (x.major, x.minor) == (v.major, v.minor))
        if newest and not any(i.cuda_patch == v and not i.custom for i in matrix.images):  # rows carry the newest patch
            unfilled.append(f"CUDA {v}{when}: no nvidia/cuda image row (images.toml) of this release, the newest of {rel.key}")
    return new, unfilled


def gpu_list_age(matrix: Matrix, today: _dt.date | None = None) -> tuple[int | None, list[str]]:
    """(days since the GPU list was compared with NVIDIA's pages, why it is stale): stale when that
    is over :data:`GPU_LIST_MAX_AGE` days ago or not recorded, or when the newest CUDA release
    targets a compute capability above every GPU of the list (a new GPU generation it lacks)."""
    today = today or _dt.date.today()
    why: list[str] = []
    age = None
    if matrix.gpus_checked is None:
        why.append("the GPU list records no date it was compared with NVIDIA's CUDA GPUs pages (checked)")
    else:
        age = (today - _dt.date.fromisoformat(matrix.gpus_checked)).days
        if age > GPU_LIST_MAX_AGE:
            why.append(f"the GPU list was compared with NVIDIA's CUDA GPUs pages {age} days ago ({matrix.gpus_checked})")
    top = max((g.cc for g in matrix.gpus), default=None)
    newest = max(matrix.cuda, key=lambda r: r.version, default=None)
    missing = sorted(a for a in newest.sm if top is None or a > top) if newest else []
    if missing and newest:
        why.append(f"CUDA {newest.key} targets compute capability {', '.join(str(a) for a in missing)}, "
                   f"above every GPU of the list (the newest: {top})")
    return age, why



def cuda_lines(ctx: IndexReader, warnings: list[str]) -> tuple[list[str], list[str]]:
    try:
        return cuda_report(ctx.matrix, cuda_versions(ctx))
    except NotFound:
        warnings.append(f"the index has no {CUDA_PROJECT} project: CUDA releases were not checked")
        return [], []


