"""Development-time script: writes the weight-free ONNX graph of all-MiniLM-L6-v2.

    pip install onnx   # only needed to run this script, never at run time
    python -m rageval.embeddings._build_graph [MODEL_DIR]

The graph computes what sentence-transformers computes for this model: BERT encoder (6 layers,
hidden 384, 12 heads, exact-erf GELU, LayerNorm eps 1e-12, token type 0), then mean pooling
over the attention mask, then L2 normalisation. Inputs ``input_ids`` and ``attention_mask``
(int64, batch x sequence, right-padded: each row's real tokens come first, as the tokenizer
writes them); output ``sentence_embedding`` (float32, batch x 384).

The padding is not computed: the encoder's matrix products run on the real tokens only, and
attention, which needs the (batch, sequence) grid, fills padded slots with copies of the row's
last token (see ``build``). Texts sorted by characters, as rageval and sentence-transformers
batch them, still leave 17-27% of the slots of a batch padded on the benchmark texts; skipping
them is most of the lead over sentence-transformers + torch (benchmarks/RESULTS.md).

Every weight is declared as an external-data initializer named as in ``model.safetensors``
(with that file's offsets), and holds no data: at load time ``local.py`` maps the safetensors
file with numpy and hands the arrays to onnxruntime (``add_external_initializers``). So the
committed graph is a few kilobytes and the weights are never duplicated on disk.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

from rageval.embeddings._weights import SafetensorsIndex, encoder_tensor_names, find_model_dir

GRAPH_PATH = Path(__file__).with_name("minilm_l6_v2.onnx")
OPSET = 17
IR_VERSION = 8  # the oldest IR that opset 17 allows, so older onnxruntime releases load it

HIDDEN = 384
HEADS = 12
LAYERS = 6
HEAD_DIM = HIDDEN // HEADS
LN_EPS = 1e-12
POOL_EPS = 1e-9  # sentence-transformers clamps the token count at 1e-9
NORM_EPS = 1e-12  # torch.nn.functional.normalize's default eps


def build(index: SafetensorsIndex) -> Any:
    from onnx import TensorProto, helper

    nodes: list[Any] = []
    consts: list[Any] = []
    counter = iter(range(1_000_000))

    def node(op: str, inputs: list[str], **attrs: Any) -> str:
        out = f"{op.lower()}_{next(counter)}"
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def const(values: list[float] | list[int], dtype: int, dims: list[int]) -> str:
        name = f"const_{next(counter)}"
        consts.append(helper.make_tensor(name, dtype, dims, values))
        return name

    def f32(value: float) -> str:
        return const([value], TensorProto.FLOAT, [])

    def i64(values: list[int]) -> str:
        return const(values, TensorProto.INT64, [len(values)])

    def linear(x: str, weight: str, bias: str) -> str:
        # torch Linear stores weight as (out, in): Gemm with transB uses it as stored, so no
        # transposed copy is made at session creation
        return node("Gemm", [x, weight, bias], transB=1)

    def layer_norm(x: str, prefix: str) -> str:
        return node(
            "LayerNormalization",
            [x, f"{prefix}.weight", f"{prefix}.bias"],
            axis=-1,
            epsilon=LN_EPS,
        )

    # embeddings: word + position + token type 0, on the padded (batch, seq) grid
    batch_seq = node("Shape", ["input_ids"])
    seq_len = node("Shape", ["input_ids"], start=1, end=2)
    positions = node(
        "Slice", ["embeddings.position_embeddings.weight", i64([0]), seq_len, i64([0])]
    )
    token_type = node(
        "Gather",
        ["embeddings.token_type_embeddings.weight", const([0], TensorProto.INT64, [])],
    )
    words = node("Gather", ["embeddings.word_embeddings.weight", "input_ids"])
    x = layer_norm(
        node("Add", [node("Add", [words, positions]), token_type]), "embeddings.LayerNorm"
    )

    # The encoder works on the real tokens only, as (tokens, hidden) rows: batches of texts
    # sorted by characters are still 17-27% padding, and every Gemm, LayerNorm and GELU
    # would pay for it. `tokens` lists the grid slots holding a real token; `slots` maps every
    # grid slot to a row of the token matrix -- its own for a real token, the row's last real
    # token ([SEP]) for padding (the tokenizer pads on the right).
    flat_mask = node("Reshape", ["attention_mask", i64([-1])])
    tokens = node("Reshape", [node("NonZero", [flat_mask]), i64([-1])])
    cumsum = node("CumSum", [flat_mask, const([0], TensorProto.INT64, [])])
    slots = node(
        "Max",
        [
            node("Sub", [cumsum, const([1], TensorProto.INT64, [])]),
            const([0], TensorProto.INT64, []),
        ],
    )
    x = node("Gather", [node("Reshape", [x, i64([-1, HIDDEN])]), tokens])

    # Attention runs on the padded grid, where a padded key is a copy of its row's [SEP] key
    # (and its value a copy of [SEP]'s value). Instead of masking padded keys (adding float32
    # min makes onnxruntime's softmax emit denormals, which slow it and the next MatMul
    # several-fold), each of the k = 1 + padding copies of [SEP] gets the score bias -log(k):
    # together they carry exactly [SEP]'s weight, so the softmax-weighted sum is unchanged.
    mask = node("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    padding = node("ReduceSum", [node("Sub", [f32(1.0), mask]), i64([1])], keepdims=1)
    next_mask = node("Slice", [mask, i64([1]), i64([2**62]), i64([1])])
    next_mask = node("Pad", [next_mask, i64([0, 0, 0, 1])])
    is_copy = node("Sub", [f32(1.0), node("Mul", [mask, next_mask])])
    copy_bias = node("Neg", [node("Log", [node("Add", [padding, f32(1.0)])])])
    score_bias = node("Unsqueeze", [node("Mul", [is_copy, copy_bias]), i64([1, 2])])
    qkv_shape = node("Concat", [batch_seq, i64([3, HEADS, HEAD_DIM])], axis=0)
    scale = f32(1.0 / math.sqrt(HEAD_DIM))

    for i in range(LAYERS):
        p = f"encoder.layer.{i}"
        # one Gemm for query, key and value: onnxruntime folds the Concat of the three
        # weights into one packed weight at session creation
        qkv_weight, qkv_bias = (
            node(
                "Concat",
                [f"{p}.attention.self.{n}.{kind}" for n in ("query", "key", "value")],
                axis=0,
            )
            for kind in ("weight", "bias")
        )
        qkv = node("Gather", [linear(x, qkv_weight, qkv_bias), slots])
        heads = node("Transpose", [node("Reshape", [qkv, qkv_shape])], perm=[2, 0, 3, 1, 4])
        # (batch, heads, seq, head_dim) each: 4-D, for which onnxruntime's Transpose is fast
        q, k, v = (node("Gather", [heads, const([j], TensorProto.INT64, [])]) for j in range(3))
        scores = node("MatMul", [q, node("Transpose", [k], perm=[0, 1, 3, 2])])
        scores = node("Add", [node("Mul", [scores, scale]), score_bias])
        context = node("MatMul", [node("Softmax", [scores], axis=-1), v])
        context = node("Transpose", [context], perm=[0, 2, 1, 3])
        context = node("Gather", [node("Reshape", [context, i64([-1, HIDDEN])]), tokens])
        d = f"{p}.attention.output.dense"
        attn = linear(context, f"{d}.weight", f"{d}.bias")
        x = layer_norm(node("Add", [attn, x]), f"{p}.attention.output.LayerNorm")

        d = f"{p}.intermediate.dense"
        hidden = linear(x, f"{d}.weight", f"{d}.bias")
        erf = node("Erf", [node("Div", [hidden, f32(math.sqrt(2.0))])])
        gelu = node("Mul", [node("Mul", [hidden, node("Add", [erf, f32(1.0)])]), f32(0.5)])
        d = f"{p}.output.dense"
        out = linear(gelu, f"{d}.weight", f"{d}.bias")
        x = layer_norm(node("Add", [out, x]), f"{p}.output.LayerNorm")

    # back to the grid; mean pooling over real tokens, then L2 normalisation
    x = node("Gather", [x, slots])
    x = node("Reshape", [x, node("Concat", [batch_seq, i64([HIDDEN])], axis=0)])
    mask3 = node("Unsqueeze", [mask, i64([2])])
    summed = node("ReduceSum", [node("Mul", [x, mask3]), i64([1])], keepdims=0)
    count = node("Max", [node("ReduceSum", [mask3, i64([1])], keepdims=0), f32(POOL_EPS)])
    mean = node("Div", [summed, count])
    squares = node("ReduceSum", [node("Mul", [mean, mean]), i64([1])], keepdims=1)
    norm = node("Max", [node("Sqrt", [squares]), f32(NORM_EPS)])
    nodes.append(helper.make_node("Div", [mean, norm], ["sentence_embedding"]))

    names = encoder_tensor_names(index)
    used = {name for n in nodes for name in n.input}
    if not used.issuperset(names) or not used.intersection(index.entries).issubset(names):
        raise ValueError("the graph and encoder_tensor_names() disagree on the weights used")
    weights = [_external_initializer(index, name) for name in names]
    graph = helper.make_graph(
        nodes,
        "all-MiniLM-L6-v2",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"]),
        ],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", HIDDEN])],
        initializer=weights + consts,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        ir_version=IR_VERSION,
        producer_name="rageval",
    )
    return model


def _external_initializer(index: SafetensorsIndex, name: str) -> Any:
    from onnx import TensorProto

    entry = index.entry(name)
    if entry.dtype != "F32":
        raise ValueError(f"{name}: expected F32, found {entry.dtype}")
    tensor = TensorProto()
    tensor.name = name
    tensor.data_type = TensorProto.FLOAT
    tensor.dims.extend(entry.shape)
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (
        ("location", index.path.name),
        ("offset", str(entry.offset)),
        ("length", str(entry.nbytes)),
    ):
        item = tensor.external_data.add()
        item.key, item.value = key, value
    return tensor


def main(argv: list[str]) -> None:
    model_dir = find_model_dir(argv[0] if argv else None)
    model = build(SafetensorsIndex.open(model_dir / "model.safetensors"))
    data = model.SerializeToString()
    GRAPH_PATH.write_bytes(data)
    print(f"wrote {GRAPH_PATH} ({len(data)} bytes)")


if __name__ == "__main__":
    main(sys.argv[1:])
