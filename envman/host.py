"""What this host has: the NVIDIA driver and its GPUs.

Read through NVML (``pynvml`` from nvidia-ml-py) first, and ``nvidia-smi`` as the fallback when
NVML cannot be loaded. Both readers are plain functions of what NVML / nvidia-smi return, so they
are tested against recorded outputs (``tests/data/host/``) on machines with no GPU.

Facts, not verdicts: whether a stack runs here is ``envman.stack.verdict`` applied to these facts
(``envman.run.preflight.preflight``). A host with no driver is a normal answer (``source == "none"``)
with the reason, never an exception.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Sequence

#: ``nvidia-smi`` query; ``compute_cap`` exists from driver 510 on.
SMI_FIELDS = ("name", "driver_version", "compute_cap", "memory.total", "uuid")
#: The same without ``compute_cap``, for older drivers (the capability then comes from the
#: matrix's GPU table, by name).
SMI_FIELDS_OLD = ("name", "driver_version", "memory.total", "uuid")

NONE, NVML, SMI, WHAT_IF = "none", "nvml", "nvidia-smi", "what-if"

# (returncode, stdout, stderr) of one nvidia-smi invocation; None when nvidia-smi is not installed.
SmiResult = tuple[int, str, str]
SmiRunner = Callable[[Sequence[str]], "SmiResult | None"]


@dataclass(frozen=True)
class HostGpu:
    index: int
    name: str
    uuid: str | None = None
    compute_cap: str | None = None  # "9.0"; None when neither NVML nor nvidia-smi nor the matrix knew
    memory_mib: int | None = None

    @property
    def label(self) -> str:
        return f"GPU {self.index} ({self.name}{', sm_' + self.compute_cap.replace('.', '') if self.compute_cap else ''})"


@dataclass(frozen=True)
class HostFacts:
    """The driver and GPUs of a host (or of a hypothetical one, ``source == "what-if"``)."""

    source: str  # nvml | nvidia-smi | none | what-if
    driver: str | None = None
    cuda_driver: str | None = None  # highest CUDA the driver supports, e.g. "12.8" (NVML only)
    gpus: tuple[HostGpu, ...] = ()
    note: str = ""  # why there is no GPU, or which fallback was used
    warnings: tuple[str, ...] = field(default=())

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus) and self.driver is not None

    def summary(self) -> str:
        if not self.has_gpu:
            return f"no NVIDIA GPU on this host ({self.note})" if self.note else "no NVIDIA GPU on this host"
        cuda = f", CUDA {self.cuda_driver}" if self.cuda_driver else ""
        what = "what-if host" if self.source == WHAT_IF else f"via {self.source}"
        gpus = "; ".join(g.label for g in self.gpus)
        return f"driver {self.driver}{cuda} ({what}): {gpus}"

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["gpus"] = [asdict(g) for g in self.gpus]
        d["warnings"] = list(self.warnings)
        d["has_gpu"] = self.has_gpu
        return d


# --------------------------------------------------------------------------- NVML


class NvmlUnavailable(Exception):
    """NVML could not be used; the message says why (library missing, driver not loaded...)."""


def from_nvml(nvml: Any) -> HostFacts:
    """Read the host through an NVML binding (the ``pynvml`` module or a stand-in for tests)."""
    err = getattr(nvml, "NVMLError", Exception)
    try:
        nvml.nvmlInit()
    except err as exc:
        raise NvmlUnavailable(str(exc) or type(exc).__name__) from exc
    try:
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        cuda = None
        try:
            v = int(nvml.nvmlSystemGetCudaDriverVersion())
            cuda = f"{v // 1000}.{(v % 1000) // 10}"
        except err:
            pass
        gpus = []
        for i in range(int(nvml.nvmlDeviceGetCount())):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            cc = None
            try:
                major, minor = nvml.nvmlDeviceGetCudaComputeCapability(h)
                cc = f"{int(major)}.{int(minor)}"
            except err:
                pass
            mem = None
            try:
                mem = int(nvml.nvmlDeviceGetMemoryInfo(h).total) // (1024 * 1024)
            except err:
                pass
            uuid = None
            try:
                uuid = _text(nvml.nvmlDeviceGetUUID(h))
            except err:
                pass
            gpus.append(HostGpu(i, _text(nvml.nvmlDeviceGetName(h)), uuid, cc, mem))
    except err as exc:
        raise NvmlUnavailable(str(exc) or type(exc).__name__) from exc
    finally:
        try:
            nvml.nvmlShutdown()
        except err:
            pass
    note = "" if gpus else "the NVIDIA driver is loaded but NVML lists no GPU"
    return HostFacts(NVML, driver, cuda, tuple(gpus), note)


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


# --------------------------------------------------------------------------- nvidia-smi


def smi_command(fields: Sequence[str] = SMI_FIELDS) -> list[str]:
    return ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader"]


def parse_smi_csv(text: str, fields: Sequence[str] = SMI_FIELDS) -> list[HostGpu]:
    """GPUs from ``nvidia-smi --query-gpu=<fields> --format=csv,noheader`` output."""
    gpus: list[HostGpu] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(fields):
            from envman.errors import counted

            raise ValueError(f"nvidia-smi: expected {counted(len(fields), 'field')}, got {len(cells)} in {line!r}")
        row = dict(zip(fields, cells))
        cc = row.get("compute_cap")
        cc = cc if cc and re.fullmatch(r"\d+\.\d+", cc) else None
        m = re.fullmatch(r"(\d+)\s*MiB", row.get("memory.total", ""))
        uuid = row.get("uuid") if row.get("uuid", "").startswith(("GPU-", "MIG-")) else None
        gpus.append(HostGpu(len(gpus), row["name"], uuid, cc, int(m.group(1)) if m else None))
    return gpus


def _smi_driver(text: str, fields: Sequence[str]) -> str | None:
    i = list(fields).index("driver_version")
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == len(fields) and re.fullmatch(r"\d+(\.\d+)+", cells[i]):
            return cells[i]
    return None


def from_nvidia_smi(run: SmiRunner) -> HostFacts | str:
    """Host facts from nvidia-smi, or the reason nvidia-smi could not give them."""
    res = run(smi_command(SMI_FIELDS))
    if res is None:
        return "nvidia-smi: not installed"
    fields: Sequence[str] = SMI_FIELDS
    rc, out, err = res
    if rc != 0 and "compute_cap" in (out + err) and "not a valid field" in (out + err):
        # Drivers before 510 do not know the compute_cap field.
        fields = SMI_FIELDS_OLD
        res = run(smi_command(fields))
        if res is None:
            return "nvidia-smi: not installed"
        rc, out, err = res
    if rc != 0:
        first = next((ln.strip() for ln in (out + "\n" + err).splitlines() if ln.strip()), f"exit {rc}")
        return f"nvidia-smi: {first}"
    try:
        gpus = parse_smi_csv(out, fields)
    except ValueError as exc:
        return str(exc)
    warnings: tuple[str, ...] = ()
    if fields is SMI_FIELDS_OLD:
        warnings = ("nvidia-smi of this driver cannot report compute capabilities (needs driver >= 510); "
                    "taken from the matrix's GPU table by name",)
    return HostFacts(SMI, _smi_driver(out, fields), None, tuple(gpus),
                     "NVML unavailable, read with nvidia-smi", warnings)


def run_smi(cmd: Sequence[str]) -> SmiResult | None:
    exe = shutil.which(cmd[0])
    if exe is None:
        return None
    import subprocess

    try:
        p = subprocess.run([exe, *cmd[1:]], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return (127, "", str(exc))
    return (p.returncode, p.stdout, p.stderr)


# --------------------------------------------------------------------------- detection


def _import_nvml() -> Any:
    try:
        import pynvml
    except ImportError as exc:  # nvidia-ml-py is a dependency; a broken install is still a "no"
        raise NvmlUnavailable(f"pynvml not importable ({exc})") from exc
    return pynvml


def detect(
    *,
    nvml: Callable[[], Any] = _import_nvml,
    smi: SmiRunner = run_smi,
    gpu_table: Callable[[str], str | None] | None = None,
) -> HostFacts:
    """This host's driver and GPUs: NVML, else nvidia-smi, else ``source="none"`` with the reasons.

    ``gpu_table(name) -> "X.Y" | None`` fills compute capabilities the reader could not give
    (old drivers' nvidia-smi), usually :func:`matrix_gpu_table`.
    """
    try:
        facts: HostFacts | str = from_nvml(nvml())
        nvml_why = ""
    except NvmlUnavailable as exc:
        nvml_why = f"NVML: {exc}"
        facts = from_nvidia_smi(smi)
    if isinstance(facts, str):
        return HostFacts(NONE, note=f"{nvml_why}; {facts}")
    if gpu_table is not None:
        facts = fill_compute_caps(facts, gpu_table)
    return facts


def fill_compute_caps(facts: HostFacts, gpu_table: Callable[[str], str | None]) -> HostFacts:
    gpus = tuple(g if g.compute_cap else replace(g, compute_cap=gpu_table(g.name)) for g in facts.gpus)
    return replace(facts, gpus=gpus)


def name_variants(name: str) -> list[str]:
    """``NVIDIA GeForce RTX 3090`` → itself, ``GeForce RTX 3090``, ``RTX 3090`` (matrix names vary)."""
    out = [name]
    for prefix in ("NVIDIA ", "GeForce ", "Tesla ", "Quadro "):
        cur = out[-1]
        if cur.startswith(prefix):
            out.append(cur[len(prefix):])
    return out


def matrix_gpu_table(matrix) -> Callable[[str], str | None]:
    def lookup(name: str) -> str | None:
        for n in name_variants(name):
            g = matrix.gpu(n)
            if g is not None:
                return str(g.cc)
        return None

    return lookup


def what_if(driver: str, compute_cap: str, name: str = "what-if GPU") -> HostFacts:
    """A hypothetical host for ``envman doctor --driver V --sm X.Y`` / ``--gpu NAME``."""
    return HostFacts(WHAT_IF, driver, None, (HostGpu(0, name, None, compute_cap, None),),
                     "hypothetical host given on the command line")
