"""Which framework the code uses: imports counted, never run."""

from __future__ import annotations

import json

import pytest

from envman.project.detect.code import read_code, tensorflow_1_only


def test_imports_are_counted_per_file(repo):
    r = repo({
        "train.py": "import torch\nfrom torch import nn\nimport torchvision\n",
        "model.py": "from torch.utils.tensorboard import SummaryWriter\n",
        "fid.py": "import tensorflow.compat.v1 as tf\n",
        "docs/x.py": "# import jax  (a comment, not an import)\nprint('import jax')\n",
        ".venv/lib/site.py": "import jax\n", "third_party/lib.py": "import jax\n",
    })
    got = {s.fact.framework: s.fact.count for s in read_code(r)}
    assert got == {"torch": 2, "tensorflow": 1}


def test_jax_family_and_keras(repo):
    r = repo({"a.py": "import flax.linen as nn\n", "b.py": "import optax\nimport jax.numpy as jnp\n", "c.py": "import keras\n"})
    assert {s.fact.framework: s.fact.count for s in read_code(r)} == {"jax": 2, "tensorflow": 1}


def test_lua_torch_caffe_and_python2(repo):
    r = repo({"train.lua": "require 'torch'\nrequire 'nn'\n", "util.lua": "local x = require('cutorch')\n"})
    assert [(s.fact.framework, s.fact.count) for s in read_code(r)] == [("lua torch", 2)]
    r = repo({"deploy.prototxt": "layer {}", "solver.prototxt": "x"})
    assert [s.fact.means() for s in read_code(r)] == ["imports caffe in 2 files"]


def test_python2_code_is_named_only_when_most_of_it_is(repo, tmp_path):
    py2 = "import theano\nprint 'hello'\ntry:\n    pass\nexcept ValueError, e:\n    pass\n"
    r = repo({"a.py": py2, "b.py": py2, "c.py": py2, "d.py": "import theano\nprint('x')\n"})
    assert [s.fact.framework for s in read_code(r) if s.fact.kind == "unsupported"] == ["python 2"]
    r = repo({"e.py": "from __future__ import print_function\nprint 'x'\n", "f.py": "print(1)\n"})
    assert [s for s in read_code(r) if s.fact.kind == "unsupported"] == []


def test_a_long_file_is_read_in_part_never_skipped_and_a_link_out_is_not_read(repo, tmp_path):
    outside = tmp_path / "outside.py"
    outside.write_text("import jax\n")
    r = repo({"big.py": "import torch\n" + "x = 1\n" * 200_000, "ok.py": "import torch\n"})
    (r.root / "link.py").symlink_to(outside)
    r = type(r).scan(r.root)
    assert {s.fact.framework: s.fact.count for s in read_code(r)} == {"torch": 2}


@pytest.mark.parametrize("text, tf1", [
    ("import tensorflow as tf\nx = tf.placeholder(tf.float32)\n", True),
    ("import tensorflow as tf\nwith tf.Session() as s:\n    pass\n", True),
    ("import tensorflow as tf\ncell = tf.contrib.rnn.LSTMCell(3)\n", True),
    ("import tensorflow.compat.v1 as tf\ntf.disable_v2_behavior()\nx = tf.placeholder(tf.float32)\n", False),
    ("import tensorflow.compat.v1 as tf\ncell = tf.contrib.rnn.LSTMCell(3)\n", True),  # gone even there
    ("import tensorflow as tf\nwith tf.compat.v1.Session() as s:\n    pass\n", False),
    ("import tensorflow as tf\nmodel = tf.keras.Sequential()\n", False),
    ("import tensorflow as tf\nmy_tf.Session = 1\n", False),
])
def test_tensorflow_1_apis(text, tf1):
    assert tensorflow_1_only(text) is tf1


def test_code_that_mostly_calls_tensorflow_1_apis_caps_the_release_below_2(repo):
    tf1 = "import tensorflow as tf\nx = tf.placeholder(tf.float32)\n"
    tf2 = "import tensorflow as tf\nm = tf.keras.Sequential()\n"
    r = repo({"a.py": tf1, "b.py": tf2, "c.py": tf2})  # one in three: the cap
    assert [s.fact.means() for s in read_code(r) if s.fact.kind == "framework"] == ["tensorflow <2"]
    r = repo({"a.py": tf1, "b.py": tf2, "c.py": tf2, "d.py": tf2})  # one in four: a leftover, no cap
    assert [s for s in read_code(r) if s.fact.kind == "framework"] == []


def _notebook(*cells: list[str]) -> str:
    return json.dumps({"nbformat": 4, "cells": [{"cell_type": "markdown", "source": ["import torch in prose\n"]}]
                       + [{"cell_type": "code", "source": c} for c in cells]})


def test_notebooks_count_only_when_no_python_file_imports_a_framework(repo):
    nb = _notebook(["!pip install neural_tangents==0.2.2\n", "import jax.numpy as np\n"], ["from jax import random"])
    r = repo({"Demo.ipynb": nb, "exp/a.ipynb": nb, "exp/plot.ipynb": _notebook(["import matplotlib\n"]),
              "util.py": "import numpy\n"})
    assert [(s.file, s.fact.means()) for s in read_code(r)] == [("Demo.ipynb", "imports jax in 2 files")]
    # one Python file that imports a framework: the notebooks are examples beside the code
    r = repo({"Demo.ipynb": nb, "exp/a.ipynb": nb, "model.py": "import torch\n"})
    assert [s.fact.means() for s in read_code(r)] == ["imports torch in 1 file"]


@pytest.mark.parametrize("cells", [
    [["%%bash\n", "import torch\n"]],            # a cell of another language
    [["!import torch\n", "%pip install torch\n"]],  # lines IPython hands to a shell
    [["x = 1  # import torch\n"]],                # not at a line's start
])
def test_a_notebooks_shell_lines_and_other_languages_import_nothing(repo, cells):
    r = repo({"Demo.ipynb": _notebook(*cells)})
    assert read_code(r) == []


def test_a_notebook_cut_short_or_not_json_imports_nothing(repo):
    r = repo({"a.ipynb": _notebook(["import torch\n"])[:-10], "b.ipynb": "import torch\n"})
    assert read_code(r) == []
