"""The local model's graph, changed so that its word-embedding table stays int8 in memory.

all-MiniLM-L6-v2-int8 keeps each weight as int8 with a float scale per row or column, and
turns it back into float32 inside the graph (Cast, then Mul) before a Gather (the word
embeddings) or a MatMul. onnxruntime's optimiser folds those constants, so the session held
the 30,522 x 384 word-embedding table as 45 MiB of float32, and folding it was half the load.
Reading the rows first and scaling only those (Gather the int8 rows and their scales, then
Cast and Mul) gives the same numbers bit for bit, since each row has its own scale; the table
stays 11 MiB of int8. The session then peaks ~85 MiB lower and loads twice as fast, with the
same speed per text (docs/PERFORMANCE.md, "--ask against simonw/llm").

The changed graph is written once into the cache folder and checked each time it is read
(ocat.memory.embedding.lean_cache), and onnxruntime reads it from there (from a file it holds
~20 MiB less than from bytes). A model without this pattern, or one that cannot be read here,
is loaded as it is.

The graph is read with a description of only the ONNX fields it reads or touches (a node's
inputs, outputs, name, operator and attributes, the weights' names and shapes); protobuf carries
every other field through unchanged.
"""

from __future__ import annotations

from typing import Any

# Bumped when the change made to the graph, or the cache's record of it, changes: cached graphs
# of another version are made again (2: the record of digests, ocat.memory.embedding.lean_cache).
VERSION = 2


def lean_graph(model: bytes) -> bytes | None:
    """The model with each table it gathers from (the word, position and token-type embeddings)
    gathered as int8 rows, then scaled; None when its graph scales no int8 table before a Gather."""
    message = _model_class()()
    message.ParseFromString(model)
    nodes = list(message.graph.node)
    shapes = {tensor.name: list(tensor.dims) for tensor in message.graph.initializer}
    changed = False
    while (found := _scaled_table_gather(nodes, shapes)) is not None:
        gather, mul, cast = found
        kept = [node for node in nodes if node is not cast and node is not mul]
        at = next(n for n, node in enumerate(kept) if node is gather)
        kept[at : at + 1] = _rows_first(gather, mul, cast)
        nodes, changed = kept, True
    if not changed:
        return None
    copies = [type(node)() for node in nodes]
    for copy, node in zip(copies, nodes):
        copy.CopyFrom(node)  # before the graph's own list is emptied
    del message.graph.node[:]
    message.graph.node.extend(copies)
    return bytes(message.SerializeToString())


def _scaled_table_gather(nodes: list[Any], shapes: dict[str, list[int]]) -> tuple[Any, Any, Any] | None:
    """A Gather of rows (axis 0) from Mul(Cast(a table), one scale per row), both initializers,
    whose two steps feed nothing else: the pattern where gathering first gives the same numbers."""
    made_by = {output: node for node in nodes for output in node.output}
    for gather in nodes:
        if gather.op_type != "Gather" or len(gather.input) != 2:
            continue
        if any(attribute.name == "axis" and attribute.i != 0 for attribute in gather.attribute):
            continue
        mul = made_by.get(gather.input[0])
        if mul is None or mul.op_type != "Mul" or len(mul.input) != 2 or mul.input[1] in made_by:
            continue
        cast = made_by.get(mul.input[0])
        if cast is None or cast.op_type != "Cast" or len(cast.input) != 1 or cast.input[0] in made_by:
            continue
        table, scale = shapes.get(cast.input[0]), shapes.get(mul.input[1])
        if not table or scale != [table[0], 1]:
            continue  # a scale per column, or one for the whole table: not gathered with the rows
        if not _used_elsewhere(nodes, (cast.output[0], mul.output[0]), (mul, gather)):
            return gather, mul, cast
    return None


def _rows_first(gather: Any, mul: Any, cast: Any) -> list[Any]:
    """Gather(Mul(Cast(table), scale), ids) as Mul(Cast(Gather(table, ids)), Gather(scale, ids))."""
    table, scale, ids, out = cast.input[0], mul.input[1], gather.input[1], gather.output[0]

    def like(node: Any, inputs: list[str], outputs: list[str], suffix: str) -> Any:
        made = type(node)()
        made.CopyFrom(node)  # its attributes too: the Gather's axis, the Cast's type
        made.input[:] = inputs
        made.output[:] = outputs
        made.name = f"{node.name}/{suffix}"
        return made

    return [
        like(gather, [table, ids], [f"{out}/int8_rows"], "int8_rows"),
        like(gather, [scale, ids], [f"{out}/row_scales"], "row_scales"),
        like(cast, [f"{out}/int8_rows"], [f"{out}/float_rows"], "rows"),
        like(mul, [f"{out}/float_rows", f"{out}/row_scales"], [out], "rows"),
    ]


def _used_elsewhere(nodes: list[Any], names: tuple[str, str], users: tuple[Any, Any]) -> bool:
    """Whether the float table, or its cast, feeds any node but the Mul and the Gather."""
    return any(name in node.input for node in nodes for name in names if node is not users[0] and node is not users[1])


def _model_class() -> Any:
    """A protobuf class for ModelProto that knows only the fields read and written here; every
    other field (the weights' bytes among them) is carried through as it was."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    package = "ocat_lean_graph"
    described = descriptor_pb2.FileDescriptorProto(name=f"{package}.proto", package=package, syntax="proto2")

    def message(name: str, *fields: tuple[str, int, int, bool]) -> None:
        """A message with (name, number, type, repeated) fields; a message-typed field is named
        by its type's name in _TYPES."""
        made = described.message_type.add(name=name)
        for field_name, number, kind, repeated in fields:
            label = field.LABEL_REPEATED if repeated else field.LABEL_OPTIONAL
            type_name = f".{package}.{_TYPES[field_name]}" if kind == field.TYPE_MESSAGE else None
            made.field.add(name=field_name, number=number, type=kind, label=label, type_name=type_name)

    # ONNX's numbers (onnx.proto): AttributeProto name 1, i 3; TensorProto dims 1, name 8;
    # NodeProto input 1, output 2, name 3, op_type 4, attribute 5; GraphProto node 1,
    # initializer 5; ModelProto graph 7.
    message("AttributeProto", ("name", 1, field.TYPE_STRING, False), ("i", 3, field.TYPE_INT64, False))
    message("TensorProto", ("dims", 1, field.TYPE_INT64, True), ("name", 8, field.TYPE_STRING, False))
    message("NodeProto", ("input", 1, field.TYPE_STRING, True), ("output", 2, field.TYPE_STRING, True),
            ("name", 3, field.TYPE_STRING, False), ("op_type", 4, field.TYPE_STRING, False),
            ("attribute", 5, field.TYPE_MESSAGE, True))
    message("GraphProto", ("node", 1, field.TYPE_MESSAGE, True), ("initializer", 5, field.TYPE_MESSAGE, True))
    message("ModelProto", ("graph", 7, field.TYPE_MESSAGE, False))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(described)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.ModelProto"))


# The message type of each message-typed field above.
_TYPES = {"attribute": "AttributeProto", "initializer": "TensorProto", "node": "NodeProto", "graph": "GraphProto"}
