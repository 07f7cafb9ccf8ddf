"""Golden cases for indexing, joining and views (see make_golden.py for the format)."""
import torch
import torch.nn.functional as F

from golden_format import Family, Input
from golden_ops_a import Draw


def index():
    f = Family("index")
    for name, v, idx_shape in (("1d", 6, (5,)), ("2d_indices", 5, (2, 3))):
        d = Draw(f.generator("embedding_" + name))
        weight = d.normal(v, 4)
        indices = d.ints(0, v, *idx_shape)
        indices.view(-1)[1] = indices.view(-1)[0]  # a repeated row accumulates its gradient
        f.add("embedding_" + name, "embedding", {},
              [Input("weight", weight), Input("indices", indices)],
              lambda w, i: F.embedding(i, w))
    for name, shape, dim, n in (("dim0", (5, 3), 0, 4), ("dim1", (3, 5), 1, 6),
                                ("dim_neg1_3d", (2, 3, 4), -1, 3)):
        d = Draw(f.generator("index_select_" + name))
        x, index = d.normal(*shape), d.ints(0, shape[dim], n)
        index[1] = index[0]  # repeated
        f.add("index_select_" + name, "index_select", {"dim": dim},
              [Input("x", x), Input("index", index)],
              lambda x, i, dim=dim: torch.index_select(x, dim, i))
    for name, shape, dim, n in (("dim0", (5, 3), 0, 4), ("dim1", (3, 4), 1, 5)):
        d = Draw(f.generator("index_add_" + name))
        x, index = d.normal(*shape), d.ints(0, shape[dim], n)
        index[1] = index[0]  # two source slices land on one row
        src_shape = list(shape)
        src_shape[dim] = n
        f.add("index_add_" + name, "index_add", {"dim": dim},
              [Input("x", x), Input("index", index), Input("src", d.normal(*src_shape))],
              lambda x, i, s, dim=dim: x.index_add(dim, i, s))
    for name, shape, dim, idx_shape in (("dim0", (4, 3), 0, (5, 3)), ("dim1", (3, 4), 1, (3, 6)),
                                        ("smaller_index", (4, 5), 1, (2, 3)),
                                        ("3d_dim1", (2, 3, 4), 1, (2, 5, 4))):
        d = Draw(f.generator("gather_" + name))
        x, index = d.normal(*shape), d.ints(0, shape[dim], *idx_shape)
        f.add("gather_" + name, "gather", {"dim": dim}, [Input("x", x), Input("index", index)],
              lambda x, i, dim=dim: torch.gather(x, dim, i))
    for name, shape, dim, idx_shape in (("dim0", (3, 4), 0, (5, 4)), ("dim1", (3, 4), 1, (3, 6)),
                                        ("3d_dim2", (2, 3, 3), 2, (2, 3, 4))):
        d = Draw(f.generator("scatter_add_" + name))
        x, index = d.normal(*shape), d.ints(0, shape[dim], *idx_shape)
        f.add("scatter_add_" + name, "scatter_add", {"dim": dim},
              [Input("x", x), Input("index", index), Input("src", d.normal(*idx_shape))],
              lambda x, i, s, dim=dim: x.scatter_add(dim, i, s))
    for name, shape, c in (("1d", (5,), 4), ("2d", (2, 3), 5)):
        d = Draw(f.generator("one_hot_" + name))
        f.add("one_hot_" + name, "one_hot", {"num_classes": c}, [Input("indices", d.ints(0, c, *shape))],
              lambda i, c=c: F.one_hot(i, c))
    return f


def join():
    f = Family("join")
    for name, shapes, dim in (("dim0", [(2, 3), (4, 3)], 0), ("dim1_three", [(2, 1), (2, 3), (2, 2)], 1),
                              ("dim_neg1_3d", [(2, 3, 2), (2, 3, 4)], -1),
                              ("dim1_3d", [(2, 1, 4), (2, 3, 4)], 1)):
        d = Draw(f.generator("cat_" + name))
        inputs = [Input(f"x{k}", d.normal(*s)) for k, s in enumerate(shapes)]
        f.add("cat_" + name, "cat", {"dim": dim}, inputs, lambda *xs, dim=dim: torch.cat(xs, dim))
    for name, shape, n, dim in (("dim0", (2, 3), 3, 0), ("dim1", (2, 3), 2, 1),
                                ("dim_neg1", (3, 2), 2, -1)):
        d = Draw(f.generator("stack_" + name))
        inputs = [Input(f"x{k}", d.normal(*shape)) for k in range(n)]
        f.add("stack_" + name, "stack", {"dim": dim}, inputs,
              lambda *xs, dim=dim: torch.stack(xs, dim))
    # split: several outputs, each with its own weight.
    for name, shape, size, dim in (("size2_dim0", (5, 3), 2, 0), ("sizes_dim1", (2, 6), [1, 3, 2], 1)):
        d = Draw(f.generator("split_" + name))
        attrs = {"dim": dim, ("split_size" if isinstance(size, int) else "sizes"): size}
        f.add("split_" + name, "split", attrs, [Input("x", d.normal(*shape))],
              lambda x, size=size, dim=dim: list(torch.split(x, size, dim)))
    return f


def views():
    f = Family("views")

    def case(name, op, attrs, shape, fn):
        x = Draw(f.generator(name)).normal(*shape)
        f.add(name, op, attrs, [Input("x", x)], fn)

    case("reshape", "reshape", {"shape": [4, 6]}, (2, 3, 4), lambda x: x.reshape(4, 6))
    case("reshape_infer", "reshape", {"shape": [-1, 3]}, (2, 3, 2), lambda x: x.reshape(-1, 3))
    case("view", "view", {"shape": [6, 2]}, (3, 4), lambda x: x.view(6, 2))
    case("permute", "permute", {"dims": [2, 0, 1]}, (2, 3, 4), lambda x: x.permute(2, 0, 1))
    case("transpose", "transpose", {"dim0": 0, "dim1": -1}, (2, 3, 4), lambda x: x.transpose(0, -1))
    case("t", "t", {}, (3, 5), lambda x: x.t())
    case("slice", "slice", {"dim": 1, "start": 1, "end": 4, "step": 1}, (3, 5),
         lambda x: x[:, 1:4])
    case("slice_step2", "slice", {"dim": 0, "start": 0, "end": 7, "step": 2}, (7, 3),
         lambda x: x[0:7:2])
    case("slice_negative_bounds", "slice", {"dim": -1, "start": -4, "end": -1, "step": 2},
         (2, 6), lambda x: x[:, -4:-1:2])
    case("slice_clamped_end", "slice", {"dim": 0, "start": 2, "end": 100, "step": 1}, (5, 2),
         lambda x: x[2:100])
    case("narrow", "narrow", {"dim": 1, "start": 1, "length": 2}, (3, 4), lambda x: x.narrow(1, 1, 2))
    case("select", "select", {"dim": 1, "index": 2}, (3, 4, 2), lambda x: x.select(1, 2))
    case("select_negative", "select", {"dim": 0, "index": -1}, (3, 4), lambda x: x.select(0, -1))
    case("expand", "expand", {"shape": [3, 4]}, (3, 1), lambda x: x.expand(3, 4))
    case("expand_new_dims", "expand", {"shape": [2, -1, 3]}, (4, 1), lambda x: x.expand(2, -1, 3))
    case("squeeze_dim", "squeeze", {"dim": 1}, (3, 1, 2), lambda x: x.squeeze(1))
    case("squeeze_all", "squeeze", {}, (1, 3, 1, 2), lambda x: x.squeeze())
    case("unsqueeze", "unsqueeze", {"dim": -1}, (3, 2), lambda x: x.unsqueeze(-1))
    case("flatten", "flatten", {"start_dim": 1, "end_dim": -1}, (2, 3, 4), lambda x: x.flatten(1))
    case("flatten_middle", "flatten", {"start_dim": 1, "end_dim": 2}, (2, 3, 2, 2),
         lambda x: x.flatten(1, 2))
    case("contiguous_of_permuted", "contiguous", {"permute_first": [1, 0]}, (3, 4),
         lambda x: x.permute(1, 0).contiguous())
    case("reshape_of_permuted", "reshape", {"permute_first": [1, 0, 2], "shape": [3, 8]},
         (2, 3, 4), lambda x: x.permute(1, 0, 2).reshape(3, 8))
    return f


def scan():
    """cumsum (with ONNX's exclusive and reverse, built here from flips and narrows) and topk."""
    f = Family("scan")

    def ref_cumsum(x, dim, exclusive, reverse):
        if reverse:
            x = x.flip(dim)
        y = x.cumsum(dim)
        if exclusive:  # shift by one along dim, a zero first: no subtraction, so no rounding
            n = x.shape[dim]
            y = torch.cat([torch.zeros_like(x.narrow(dim, 0, min(n, 1))), y.narrow(dim, 0, max(n - 1, 0))], dim)
        return y.flip(dim) if reverse else y

    for name, shape, dim, exclusive, reverse in (
            ("dim0", (4, 3), 0, False, False), ("dim1", (3, 5), 1, False, False),
            ("dim_neg1_3d", (2, 3, 4), -1, False, False), ("exclusive", (3, 5), 1, True, False),
            ("reverse", (3, 5), 1, False, True), ("reverse_exclusive", (2, 4, 3), 1, True, True),
            ("size1_dim", (3, 1), 1, True, False), ("empty_dim", (3, 0), 1, False, False)):
        x = Draw(f.generator("cumsum_" + name)).normal(*shape)
        f.add("cumsum_" + name, "cumsum", {"dim": dim, "exclusive": exclusive, "reverse": reverse},
              [Input("x", x)], lambda x, d=dim, e=exclusive, r=reverse: ref_cumsum(x, d, e, r))
    x = Draw(f.generator("cumsum_int64")).ints(-9, 10, 3, 4)
    f.add("cumsum_int64", "cumsum", {"dim": 1, "exclusive": False, "reverse": False}, [Input("x", x)],
          lambda x: x.cumsum(1))
    # topk on distinct values (PyTorch does not promise an order among ties; smelt's tie order
    # is checked in tests/ops/scan_test.cpp and by the ONNX conformance cases)
    for name, shape, k, dim, largest in (
            ("largest_dim1", (3, 6), 2, 1, True), ("smallest_dim0", (5, 3), 3, 0, False),
            ("3d_neg1", (2, 3, 5), 4, -1, True), ("k_all", (2, 4), 4, 1, False),
            ("k_zero", (3, 4), 0, 1, True), ("size1_dim", (4, 1), 1, 1, True)):
        x = Draw(f.generator("topk_" + name)).normal(*shape)
        f.add("topk_" + name, "topk", {"k": k, "dim": dim, "largest": largest}, [Input("x", x)],
              lambda x, k=k, d=dim, l=largest: tuple(torch.topk(x, k, dim=d, largest=l, sorted=True)))
    # distinct int64 values per row
    gen = f.generator("topk_int64")
    x = torch.stack([torch.randperm(7, generator=gen) * 3 - 9 for _ in range(3)])
    f.add("topk_int64", "topk", {"k": 3, "dim": 1, "largest": True}, [Input("x", x)],
          lambda x: tuple(torch.topk(x, 3, dim=1)))
    return f


FAMILIES = [index, join, views, scan]
