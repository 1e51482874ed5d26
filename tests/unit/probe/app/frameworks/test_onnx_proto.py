"""The hand-written ONNX model encoding (``envman/probe/app/frameworks/onnx_proto.py``)."""

from __future__ import annotations

import pytest

from envman.probe.app.frameworks import onnx_proto as onnx_proto_mod


def test_onnx_model_encoding_is_valid_protobuf():
    onnx = pytest.importorskip("onnx")
    m = onnx.load_from_string(onnx_proto_mod.onnx_model("MatMul", [("A", [2, 3]), ("B", [3, 4])], ("C", [2, 4])))
    onnx.checker.check_model(m)
    assert m.graph.node[0].op_type == "MatMul"


def test_pb_varint():
    assert onnx_proto_mod._pb_varint(0) == b"\x00"
    assert onnx_proto_mod._pb_varint(300) == b"\xac\x02"
