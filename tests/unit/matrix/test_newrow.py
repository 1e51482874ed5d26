"""A row `envman matrix update` derives (envman/matrix/newrow.py): the sha256 of each pin read from the
index (Linux x86_64 or pure wheels of the pinned version, or none at all), and the nearest earlier
row a new one inherits from."""

from __future__ import annotations

from packaging.version import Version

from envman.matrix.load import load_matrix
from envman.matrix.newrow import previous_row
from tests.unit.render.test_plan_cuda_libs import H1, H2, H3


def test_pin_hashes_are_the_x86_64_and_pure_wheels_of_the_pinned_version_or_none():
    from envman.matrix.index import IndexFile, NotFound
    from envman.matrix.newrow import pin_hashes

    def f(name: str, digest: str | None) -> IndexFile:
        return IndexFile(name, f"https://x.example/{name}", (("sha256", digest),) if digest else ())

    pages = {
        "nvidia-cublas-cu12": [f("nvidia_cublas_cu12-12.4.5.8-py3-none-manylinux2014_x86_64.whl", H1),
                               f("nvidia_cublas_cu12-12.4.5.8-py3-none-manylinux2014_aarch64.whl", H2),  # not x86_64
                               f("nvidia_cublas_cu12-12.4.5.9-py3-none-manylinux2014_x86_64.whl", H3),   # another version
                               f("nvidia_cublas_cu12-12.4.5.8-py3-none-win_amd64.whl", H2)],             # not Linux
        "triton": [f("triton-3.1.0-cp310-cp310-manylinux_2_17_x86_64.whl", H2),
                   f("triton-3.1.0-cp311-cp311-manylinux_2_17_x86_64.whl", H3)],
        "jax-cuda12-plugin": [f("jax_cuda12_plugin-0.4.30-py3-none-any.whl", None)],  # no sha256 on the page
    }

    def files_of(name: str):
        if name not in pages:
            raise NotFound("not on the index", where=name)
        return pages[name]

    assert pin_hashes(["triton==3.1.0; python_version < \"3.13\"", "nvidia-cublas-cu12==12.4.5.8"], files_of) == {
        "nvidia-cublas-cu12": [H1], "triton": [H3, H2]}
    assert pin_hashes(["jax-cuda12-plugin==0.4.30"], files_of) is None
    assert pin_hashes(["nvidia-nccl-cu12==2.21.5"], files_of) is None
    assert pin_hashes(["nvidia-cublas-cu12==12.4.5.7"], files_of) is None


def test_a_new_row_inherits_from_the_nearest_earlier_row_of_its_variant_else_its_cuda_major():
    m = load_matrix()
    torch = sorted((b for b in m.builds if b.framework == "torch" and b.cuda is not None), key=lambda b: b.version)
    newest = torch[-1]
    later = Version(f"{newest.version.major}.{newest.version.minor + 50}")
    got = previous_row(m, "torch", later, newest.variant, newest.cuda.major)
    assert got is not None and got.variant == newest.variant and got.version == newest.version
    other = previous_row(m, "torch", later, "no-such-variant", newest.cuda.major)
    assert other is not None and other.cuda is not None and other.cuda.major == newest.cuda.major
    cpu = previous_row(m, "torch", later, "no-such-variant", None)
    assert cpu is None or cpu.cuda is None  # a CPU row inherits from a CPU row only
    assert previous_row(m, "torch", Version("0.0.1"), newest.variant, newest.cuda.major) is None  # nothing earlier
    assert previous_row(m, "no-such-framework", later, "x", None) is None
