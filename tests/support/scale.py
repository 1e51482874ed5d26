"""A matrix made ``k`` times larger, for tests and benchmarks of costs that must grow linearly.

Copy ``i`` of every framework row, CUDA base image and CUDA release has its version's major moved
by ``1000 * i`` (CUDA by ``100 * i``; a base image a row pins gets its own tag), so each copy
resolves among its own rows exactly as the original does, and the number of rows a name matches
stays what it was. The CPU base images are shared, as they would be.
"""

from __future__ import annotations

from dataclasses import replace

from packaging.version import Version

from envman.matrix.model import Matrix


def _shift(v: Version | None, by: int) -> Version | None:
    if v is None or by == 0:
        return v
    return Version(".".join([str(v.release[0] + by), *map(str, v.release[1:])]))


def scaled_matrix(matrix: Matrix, k: int) -> Matrix:
    builds, images, cuda = [], [], []
    for i in range(k):
        builds += [replace(b, version=_shift(b.version, 1000 * i), cuda=_shift(b.cuda, 100 * i),
                           base_image=f"{b.base_image}-{i}" if b.base_image and i else b.base_image)
                   for b in matrix.builds]
        pinned = {b.base_image for b in matrix.builds}
        images += [replace(img, cuda=_shift(img.cuda, 100 * i), cuda_patch=_shift(img.cuda_patch, 100 * i),
                           tag=f"{img.tag}-{i}" if i and img.ref in pinned else img.tag)
                   for img in matrix.images if i == 0 or img.cuda is not None or img.ref in pinned]
        cuda += [replace(r, version=_shift(r.version, 100 * i)) for r in matrix.cuda]
    return replace(matrix, builds=tuple(builds), images=tuple(images), cuda=tuple(cuda))
