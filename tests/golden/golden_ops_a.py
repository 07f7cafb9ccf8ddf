"""Golden cases for elementwise ops, reductions and softmax (see make_golden.py for the format).

Each case names the smelt public function it tests ("op") and that function's arguments
("attrs", named as in include/smelt/ops.h); the torch lambda is the PyTorch equivalent. Inputs are
float32 unless noted; shapes stay small so the JSON stays small.
"""
import torch
import torch.nn.functional as F

from golden_format import Family, Input


class Draw:
    """Seeded random tensors for one case."""

    def __init__(self, gen):
        self.gen = gen

    def normal(self, *shape, scale=1.0):
        return torch.randn(shape, generator=self.gen) * scale

    def uniform(self, lo, hi, *shape):
        return torch.rand(shape, generator=self.gen) * (hi - lo) + lo

    def away_from_zero(self, *shape):  # |x| in [0.5, 2): safe denominators
        sign = torch.randint(0, 2, shape, generator=self.gen) * 2 - 1
        return self.uniform(0.5, 2.0, *shape) * sign

    def ints(self, lo, hi, *shape):  # Int64 in [lo, hi)
        return torch.randint(lo, hi, shape, generator=self.gen)

    def small_ints_as_float(self, lo, hi, *shape):  # float32 with deliberate ties
        return self.ints(lo, hi, *shape).float()


def unary():
    f = Family("unary")

    def case(name, op, fn, attrs=None, x=None, lo=None, hi=None, shape=(3, 5)):
        d = Draw(f.generator(name))
        if x is None:
            x = d.uniform(lo, hi, *shape) if lo is not None else d.normal(*shape, scale=1.5)
        f.add(name, op, attrs or {}, [Input("x", x)], fn)

    case("neg", "neg", torch.neg)
    case("exp", "exp", torch.exp)
    case("log", "log", torch.log, lo=0.1, hi=4.0)
    case("sqrt", "sqrt", torch.sqrt, lo=0.1, hi=4.0)
    case("rsqrt", "rsqrt", torch.rsqrt, lo=0.2, hi=4.0)
    case("abs", "abs", torch.abs)
    case("sign", "sign", torch.sign, x=torch.tensor([[-2.0, 0.0, 3.0], [0.5, -0.25, 0.0]]))
    case("erf", "erf", torch.erf)
    case("relu", "relu", torch.relu)
    # rounding: ties (x.5, -x.5) and integers on purpose; round is half to even
    ties = torch.tensor([[-2.5, -1.5, -0.5, 0.5, 1.5], [2.5, -0.0, 3.0, -1.2, 0.7], [1.49, -1.51, 7.5, -7.5, 2.0]])
    case("floor", "floor", torch.floor, x=ties)
    case("ceil", "ceil", torch.ceil, x=ties)
    case("round", "round", torch.round, x=ties)
    case("sin", "sin", torch.sin)
    case("cos", "cos", torch.cos)
    case("tan", "tan", torch.tan, lo=-1.2, hi=1.2)
    case("asin", "asin", torch.asin, lo=-0.95, hi=0.95)
    case("acos", "acos", torch.acos, lo=-0.95, hi=0.95)
    case("atan", "atan", torch.atan)
    case("sinh", "sinh", torch.sinh)
    case("cosh", "cosh", torch.cosh)
    case("asinh", "asinh", torch.asinh)
    case("acosh", "acosh", torch.acosh, lo=1.05, hi=4.0)
    case("atanh", "atanh", torch.atanh, lo=-0.95, hi=0.95)
    case("leaky_relu_default", "leaky_relu", F.leaky_relu)
    case("leaky_relu_0.2", "leaky_relu", lambda x: F.leaky_relu(x, 0.2),
         attrs={"negative_slope": 0.2})
    case("sigmoid", "sigmoid", torch.sigmoid)
    case("tanh", "tanh", torch.tanh)
    case("gelu_erf", "gelu", lambda x: F.gelu(x, approximate="none"),
         attrs={"approximate": "none"}, shape=(4, 6))
    case("gelu_tanh", "gelu", lambda x: F.gelu(x, approximate="tanh"),
         attrs={"approximate": "tanh"}, shape=(4, 6))
    case("silu", "silu", F.silu)
    case("softplus_default", "softplus", F.softplus)
    # beta 2, threshold 1: inputs with beta*x > 1 take the linear branch.
    case("softplus_beta2_threshold1", "softplus", lambda x: F.softplus(x, beta=2.0, threshold=1.0),
         attrs={"beta": 2.0, "threshold": 1.0}, shape=(4, 6))
    case("clamp_min_max", "clamp", lambda x: torch.clamp(x, -0.5, 0.75),
         attrs={"min": -0.5, "max": 0.75})
    case("clamp_min_only", "clamp", lambda x: torch.clamp(x, min=-0.3), attrs={"min": -0.3})
    case("clamp_max_only", "clamp", lambda x: torch.clamp(x, max=0.4), attrs={"max": 0.4})
    case("cast_to_float64", "cast", lambda x: x.to(torch.float64), attrs={"dtype": "float64"})
    # Float to integer truncates toward zero, as C++ and PyTorch do.
    case("cast_to_int64", "cast", lambda x: x.to(torch.int64), attrs={"dtype": "int64"},
         x=torch.tensor([[-2.75, -1.5, -0.5, 0.0], [0.5, 1.25, 2.99, 7.0]]))
    case("cast_to_bool", "cast", lambda x: x.to(torch.bool), attrs={"dtype": "bool"},
         x=torch.tensor([[-1.5, 0.0, 0.25], [0.0, 3.0, -0.0]]))
    return f


def binary():
    f = Family("binary")

    def case(name, op, fn, a_shape=(3, 4), b_shape=(3, 4), draw_a=None, draw_b=None, attrs=None,
             grad=None):
        d = Draw(f.generator(name))
        a = draw_a(d, *a_shape) if draw_a else d.normal(*a_shape)
        b = draw_b(d, *b_shape) if draw_b else d.normal(*b_shape)
        f.add(name, op, attrs or {}, [Input("a", a, grad), Input("b", b, grad)], fn)

    positive = lambda d, *s: d.uniform(0.5, 2.0, *s)  # noqa: E731
    nonzero = Draw.away_from_zero
    ties = lambda d, *s: d.small_ints_as_float(-2, 3, *s)  # noqa: E731
    bcast = {"a_shape": (3, 1, 4), "b_shape": (2, 4)}  # -> (3, 2, 4)
    for op, fn in (("add", torch.add), ("sub", torch.sub), ("mul", torch.mul)):
        case(op, op, fn)
        case(op + "_broadcast", op, fn, **bcast)
    case("add_scalar_rhs", "add", torch.add, b_shape=())
    case("div", "div", torch.div, draw_b=nonzero)
    case("div_broadcast", "div", torch.div, draw_b=nonzero, **bcast)
    case("pow", "pow", torch.pow, draw_a=positive)
    case("pow_broadcast", "pow", torch.pow, draw_a=positive, **bcast)
    for e in (3.0, 0.5, -1.5):
        d = Draw(f.generator(f"pow_scalar_{e}"))
        f.add(f"pow_scalar_{e}", "pow_scalar", {"exponent": e},
              [Input("a", d.uniform(0.5, 2.0, 3, 4))], lambda a, e=e: torch.pow(a, e))
    for op, fn in (("maximum", torch.maximum), ("minimum", torch.minimum)):
        case(op, op, fn)
        case(op + "_broadcast", op, fn, **bcast)
        # Equal elements split the gradient in half between the two sides, as in PyTorch.
        case(op + "_ties", op, fn, draw_a=ties, draw_b=ties)
    for op, fn in (("eq", torch.eq), ("ne", torch.ne), ("lt", torch.lt), ("le", torch.le),
                   ("gt", torch.gt), ("ge", torch.ge)):
        case(op, op, fn, draw_a=ties, draw_b=ties, grad=False)
        case(op + "_broadcast", op, fn, draw_a=ties, draw_b=ties, grad=False, **bcast)
    int64 = lambda d, *s: d.ints(-5, 6, *s)  # noqa: E731
    for op, fn in (("add", torch.add), ("sub", torch.sub), ("mul", torch.mul),
                   ("maximum", torch.maximum), ("lt", torch.lt)):
        case(op + "_int64", op, fn, draw_a=int64, draw_b=int64, **bcast)

    def where_case(name, c_shape, a_shape, b_shape, dtype=torch.float32):
        d = Draw(f.generator(name))
        cond = d.ints(0, 2, *c_shape).bool()
        a, b = d.normal(*a_shape).to(dtype), d.normal(*b_shape).to(dtype)
        if dtype == torch.int64:
            a, b = d.ints(-5, 6, *a_shape), d.ints(-5, 6, *b_shape)
        f.add(name, "where", {}, [Input("cond", cond), Input("a", a), Input("b", b)], torch.where)

    where_case("where", (3, 4), (3, 4), (3, 4))
    where_case("where_broadcast", (3, 1, 4), (2, 4), (1, 1, 1))
    where_case("where_int64", (2, 3), (2, 3), (3,), torch.int64)
    return f


def reduce():
    f = Family("reduce")

    def case(name, op, fn, attrs, x=None, shape=(3, 4, 5)):
        d = Draw(f.generator(name))
        f.add(name, op, attrs, [Input("x", d.normal(*shape) if x is None else x)], fn)

    for op, tfn in (("sum", torch.sum), ("mean", torch.mean), ("amax", torch.amax),
                    ("amin", torch.amin)):
        for dims, keep in (([], False), ([1], False), ([0, 2], True), ([-1], True), ([2, 0], False)):
            name = f"{op}_dims{'_'.join(map(str, dims)) or 'all'}{'_keepdim' if keep else ''}"
            if dims:
                fn = lambda x, op=op, dims=dims, keep=keep: getattr(torch, op)(
                    x, dim=tuple(dims), keepdim=keep)
            else:  # (PyTorch's dim=() means "all dims" only for some of these ops)
                fn = lambda x, op=op: getattr(torch, op)(x)
            case(name, op, fn, {"dims": dims, "keepdim": keep})
    # Ties: amax/amin share the gradient equally among the tied extremes, as PyTorch does.
    for op in ("amax", "amin"):
        d = Draw(f.generator(op + "_ties"))
        x = d.small_ints_as_float(-1, 2, 4, 6)
        f.add(op + "_ties_dim1", op, {"dims": [1], "keepdim": False}, [Input("x", x)],
              lambda x, op=op: getattr(torch, op)(x, dim=1))
        f.add(op + "_ties_all", op, {"dims": [], "keepdim": False}, [Input("x", x.clone())],
              lambda x, op=op: getattr(torch, op)(x))
    # prod: random values, zeros (one and several per output: the gradient is not out / x),
    # an empty reduced dim (the product of nothing is 1), int64 with wrap-around (NaN: JSON has
    # none, so tests/ops/reduce_edges_test.cpp checks it).
    for dims, keep in (([], False), ([1], False), ([0, 2], True), ([-1], True)):
        name = f"prod_dims{'_'.join(map(str, dims)) or 'all'}{'_keepdim' if keep else ''}"
        x = Draw(f.generator(name)).uniform(0.5, 1.5, 3, 4, 5)
        fn = (lambda x: torch.prod(x)) if not dims else (
            lambda x, dims=dims, keep=keep: torch.prod(x, dim=dims[0], keepdim=keep) if len(dims) == 1
            else torch.prod(torch.prod(x, dim=dims[1], keepdim=keep), dim=dims[0], keepdim=keep))
        case(name, "prod", fn, {"dims": dims, "keepdim": keep}, x=x)
    zeros = Draw(f.generator("prod_zeros")).small_ints_as_float(-1, 3, 4, 6)
    zeros[0] = torch.tensor([1.0, 2.0, -1.0, 2.0, 1.0, 2.0])  # no zero
    zeros[1] = torch.tensor([0.0, 2.0, -1.0, 2.0, 1.0, 2.0])  # one zero
    zeros[2] = torch.tensor([0.0, 2.0, 0.0, 2.0, 1.0, 2.0])   # two zeros
    f.add("prod_zeros_dim1", "prod", {"dims": [1], "keepdim": False}, [Input("x", zeros)],
          lambda x: torch.prod(x, dim=1))
    f.add("prod_empty_dim", "prod", {"dims": [1], "keepdim": False},
          [Input("x", torch.zeros(3, 0))], lambda x: torch.prod(x, dim=1))
    big = torch.tensor([[2**40, 2**30, 3], [-7, 5, -2], [2**62, 2, 1]], dtype=torch.int64)
    case("prod_int64_wraps", "prod", lambda x: torch.prod(x, dim=1), {"dims": [1], "keepdim": False},
         x=big)
    case("sum_int64", "sum", lambda x: torch.sum(x, dim=1), {"dims": [1], "keepdim": False},
         x=Draw(f.generator("sum_int64")).ints(-9, 10, 3, 4))
    for dims, corr, keep in (([], 1, False), ([], 0, False), ([1], 1, False), ([0, 2], 0, True),
                             ([-1], 1, True), ([2], 2, False)):
        name = f"var_dims{'_'.join(map(str, dims)) or 'all'}_corr{corr}{'_keepdim' if keep else ''}"
        case(name, "var",
             lambda x, dims=dims, corr=corr, keep=keep: torch.var(
                 x, dim=tuple(dims) or None, correction=corr, keepdim=keep),
             {"dims": dims, "correction": corr, "keepdim": keep})
    for dim, keep in ((0, False), (1, False), (-1, True), (2, False)):
        case(f"argmax_dim{dim}{'_keepdim' if keep else ''}", "argmax",
             lambda x, dim=dim, keep=keep: torch.argmax(x, dim=dim, keepdim=keep),
             {"dim": dim, "keepdim": keep})
    return f


def softmax():
    f = Family("softmax")
    for op, fn in (("softmax", torch.softmax), ("log_softmax", torch.log_softmax)):
        for dim, shape in ((-1, (4, 7)), (0, (4, 7)), (1, (2, 5, 3)), (-1, (2, 3, 6))):
            name = f"{op}_dim{dim}_{'x'.join(map(str, shape))}"
            x = Draw(f.generator(name)).normal(*shape, scale=2.0)
            f.add(name, op, {"dim": dim}, [Input("x", x)], lambda x, fn=fn, dim=dim: fn(x, dim))
        # Large logits: a kernel that forgets to subtract the max overflows exp().
        name = op + "_large_logits"
        x = Draw(f.generator(name)).normal(3, 5, scale=30.0) + 80.0
        f.add(name, op, {"dim": 1}, [Input("x", x)], lambda x, fn=fn: fn(x, 1))
    return f


FAMILIES = [unary, binary, reduce, softmax]
