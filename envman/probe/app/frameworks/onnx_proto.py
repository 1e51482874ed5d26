"""A tiny protobuf writer: enough to build an ONNX model without the onnx package."""

def _pb_varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _pb_int(field, v):
    return _pb_varint(field << 3) + _pb_varint(v)


def _pb_bytes(field, b):
    return _pb_varint((field << 3) | 2) + _pb_varint(len(b)) + b


def _pb_str(field, s):
    return _pb_bytes(field, s.encode("utf-8"))


def _onnx_value_info(name, shape):
    dims = b"".join(_pb_bytes(1, _pb_int(1, d)) for d in shape)
    tensor_type = _pb_int(1, 1) + _pb_bytes(2, dims)  # elem_type FLOAT, shape
    return _pb_str(1, name) + _pb_bytes(2, _pb_bytes(1, tensor_type))


def onnx_model(op_type, inputs, output, opset=13, ir_version=7):
    """Serialized ONNX ModelProto of one node: ``inputs`` [(name, shape)], ``output`` too."""
    node = b"".join(_pb_str(1, n) for n, _ in inputs) + _pb_str(2, output[0])
    node += _pb_str(3, "envman_node") + _pb_str(4, op_type)
    graph = _pb_bytes(1, node) + _pb_str(2, "envman_probe")
    graph += b"".join(_pb_bytes(11, _onnx_value_info(n, s)) for n, s in inputs)
    graph += _pb_bytes(12, _onnx_value_info(output[0], output[1]))
    opset_id = _pb_str(1, "") + _pb_int(2, opset)
    return (_pb_int(1, ir_version) + _pb_str(2, "envman-probe") + _pb_bytes(7, graph) +
            _pb_bytes(8, opset_id))
