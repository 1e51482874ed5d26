"""Where things go in a stack or project image, and the two Dockerfile dialects.

The venv, envman's own directory, the CA bundle's places, BuildKit's cache mounts, the wheel store's
address as a build step reaches it, and the build context's files: the values the plan
(:mod:`envman.render.plan`, :mod:`envman.render.layerplan`), its sections
(:mod:`envman.render.sections`) and the layout (:mod:`envman.render.layout`) share.
"""

from __future__ import annotations

from typing import Literal


from envman import labels as L
from envman.probe.app.contract import IMAGE_DIR, PROBE_FILE


VENV = "/opt/venv"
VENV_PYTHON = f"{VENV}/bin/python"
ENVMAN_DIR = IMAGE_DIR
WHEELS_DIR = f"{ENVMAN_DIR}/wheels"
PYTHON_DIR = f"{ENVMAN_DIR}/python"  # python-build-standalone installs (strategy "standalone")
PROJECT_DIR = f"{ENVMAN_DIR}/project"  # a project image's requirements and lock
#: A project image's lock (``envman.lock`` as pip reads it) in its build context and in PROJECT_DIR.
LOCK_CONTEXT_FILE = "envman.lock.txt"
CA_DEST = "/usr/local/share/ca-certificates/envman-ca.crt"
SYSTEM_CA = "/etc/ssl/certs/ca-certificates.crt"  # what update-ca-certificates writes (Debian/Ubuntu)
BOOTSTRAP = "/tmp/envman-uv"

#: uv, pinned: it installs python-build-standalone for Pythons the distribution lacks.
UV_VERSION = "0.13.8"

#: Wheels of these projects in a wheelhouse serve the Python layer (the venv's pip upgrade, the
#: uv bootstrap); they are not force-installed into the venv with the others.
TOOL_WHEELS = frozenset({"pip", "uv"})

#: The two Dockerfile dialects: the classic builder's, and BuildKit's (RUN --mount).
BuilderKind = Literal["classic", "buildkit"]
BUILDER_KINDS: tuple[BuilderKind, ...] = ("classic", "buildkit")

# BuildKit only: where the cache mounts, the bind-mounted CA bundle and uv live during a RUN.
#: The requirements file of the CUDA-library step when its pins have hashes (written and removed
#: in that step).
CUDA_LIBS_FILE = "/tmp/envman-cuda-libs.txt"
#: The wheel store (``envman.images.wheelstore``) as the classic builder's CUDA-library step reaches
#: it: envman's build serves this user's stored wheels on its own build network under this host
#: name and port. The name and port are fixed, so the step, and its cache key, is the same in every
#: build; a build that is not served (``docker build`` of a written context) finds no such host
#: and installs from the index.
WHEEL_STORE_HOST = "envman-wheels"
WHEEL_STORE_PORT = 47263
WHEEL_STORE_URL = f"http://{WHEEL_STORE_HOST}:{WHEEL_STORE_PORT}/"
#: The time every file a reproducible step writes is set to (1980-01-01T00:00:00Z, the earliest a zip
#: entry can carry), and the SOURCE_DATE_EPOCH those steps run with: see layout's ``_settled``.
SETTLED_TIME = 315532800
#: Where the Python and CUDA-library steps write (the venv and python-build-standalone live under
#: /opt; pip's and uv's temporary files under /tmp; HOME is /root while building).
SETTLED_DIRS = ("/opt", "/tmp", "/root")
CACHE_ROOT = "/var/cache/envman"
PIP_CACHE = f"{CACHE_ROOT}/pip"
UV_CACHE = f"{CACHE_ROOT}/uv"
APT_ARCHIVES = f"{CACHE_ROOT}/apt"
CA_MOUNT = "/run/envman/ca-bundle.crt"
CA_MERGED = "/tmp/envman-ca.pem"
TOOLS_CACHE = f"{CACHE_ROOT}/tools"
UV_TOOL = f"{TOOLS_CACHE}/uv-{UV_VERSION}"
#: The build secret that carries index credentials: a netrc file, mounted where pip and uv read it.
NETRC_SECRET = "envman-netrc"
NETRC_TARGET = "/root/.netrc"
#: uv installs packages into Pythons from this one up; older ones get pip (a version string: the
#: run path, which reads this module, does not import packaging).
MIN_UV_PYTHON = "3.8"

#: The files of a stack's build context that its Dockerfile copies into ``ENVMAN_DIR``.
PROBE_CONTEXT_FILE = f"envman/{PROBE_FILE}"
#: --ca-bundle's copy in a stack's build context.
CA_CONTEXT_FILE = "envman/ca-bundle.crt"
ENVMAN_FILES = ("envman/entrypoint.sh", PROBE_CONTEXT_FILE, "envman/stack.json")
#: The labels a stack image's Dockerfile writes, in order (``envman.render-hash`` follows them,
#: on the last line, once the render hash is known).
STACK_LABELS = (L.MANAGED, L.NAME, L.STACK, L.VERSION)

#: pip's option for no cache (the classic builder, a layer on an envman image).
NO_PIP_CACHE = ("--no-cache-dir",)
#: What pip, requests and uv trust in a step that merged the CA bundle.
CA_STEP_ENV = tuple((k, CA_MERGED) for k in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"))
