"""A base rebuilt from NVIDIA's recipe (envman/images/base.py): the line of a failed build that says
why (envman's own check first, then apt's, dpkg's, curl's or gpg's first error, never the echoed RUN
line) with the fix for its class, and the labels a rebuilt base carries."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("tail, cause, fix", [
    ("Step 5/9 : RUN x\n\x1b[91mE: Failed to fetch http://r/x.deb  Hash Sum mismatch\nE: Unable to fetch some archives\n",
     "E: Failed to fetch http://r/x.deb  Hash Sum mismatch", "do not work around it"),
    ("#9 1.2 sha256sum: WARNING: 1 computed checksum did NOT match\n#9 1.2 envman: x.deb does not match the sha256 ...\n",
     "envman: x.deb does not match the sha256 ...", "do not work around it"),
    ("curl: (60) SSL certificate problem: unable to get local issuer certificate\n",
     "curl: (60) SSL certificate problem: unable to get local issuer certificate", "--ca-bundle"),
    ("Setting up ca-certificates ...\nE: Failed to fetch http://r/InRelease  Temporary failure resolving 'r'\n",
     "E: Failed to fetch http://r/InRelease  Temporary failure resolving 'r'", "could not reach a server"),
    ("#5 0.9 envman: the key at https://r/3bf863cc.pub has fingerprint ABCD, not NVIDIA's EB69: refusing it\n",
     "envman: the key at https://r/3bf863cc.pub has fingerprint ABCD, not NVIDIA's EB69: refusing it",
     "do not work around it"),
    ("something else entirely\n", "the build failed", "read the log tail"),
    # the log echoes the RUN line, which names every check: the fix follows the output, not the command
    ("Step 2/4 : RUN curl -o k.pub U && { [ \"$fpr\" = X ] || { echo \"envman: the key has fingerprint $fpr\"; }; }"
     " && echo x | sha256sum -c || echo \"does not match the sha256\"\n"
     "curl: (6) Could not resolve host: developer.download.nvidia.com\n"
     "The command '/bin/sh -c curl -o k.pub U && ... does not match the sha256' returned a non-zero code: 6\n",
     "curl: (6) Could not resolve host: developer.download.nvidia.com", "NVIDIA's CUDA apt repository cannot be reached"),
])
def test_a_failed_base_build_names_its_cause_and_the_fix_for_it(tail, cause, fix):
    from envman.errors import BuildError
    from envman.images.base import failure_cause, failure_fix

    exc = BuildError("the build failed", log_tail=tail)
    assert failure_cause(exc) == cause
    assert fix in failure_fix(exc)


def test_a_failed_build_with_no_log_names_the_error_itself():
    from envman.errors import BuildError
    from envman.images.base import failure_cause

    assert failure_cause(BuildError("the engine went away", log_tail="")) == "the engine went away"
    assert failure_cause(BuildError("x", log_tail="\x1b[31m\n#3 0.1 \n")) == "x"  # colours and prefixes only


def test_a_rebuilt_bases_labels_say_what_it_is_and_clip_its_sources():
    from types import SimpleNamespace

    from envman import labels as L
    from envman.images.base import base_labels

    base = SimpleNamespace(nvidia_ref="nvidia/cuda:10.0-base-ubuntu18.04", recipe_hash="ab" * 32,
                           sources=("https://a.example/" + "x" * 600, "https://b.example/" + "y" * 600))
    labels = base_labels(base, 1000, "alice")
    assert labels[L.MANAGED] == L.TRUE and labels[L.ROLE] == L.ROLE_BASE
    assert labels[L.NAME] == base.nvidia_ref and labels[L.BASE_RECIPE] == base.recipe_hash
    assert len(labels[L.BASE_SOURCE]) == 1000 and labels[L.BASE_SOURCE].startswith("https://a.example/")
    assert all(isinstance(v, str) for v in labels.values())
