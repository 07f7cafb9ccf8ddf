"""Golden cases for contractions, pooling, normalization, dropout, losses, indexing, joining and
views (see make_golden.py for the format and golden_ops_a.py for the elementwise ones)."""
import torch
import torch.nn.functional as F

from golden_format import Family, Input
from golden_ops_a import Draw

REDUCTIONS = ("mean", "sum", "none")


def matmul():
    f = Family("matmul")
    for name, a_shape, b_shape in (
            ("2d", (3, 4), (4, 5)),
            ("vec_mat", (4,), (4, 3)),
            ("mat_vec", (3, 4), (4,)),
            ("dot", (6,), (6,)),
            ("batched", (2, 3, 4), (2, 4, 5)),
            ("batched_broadcast", (2, 1, 3, 4), (5, 4, 2)),  # -> (2, 5, 3, 2)
            ("batched_times_2d", (3, 2, 4), (4, 3)),
            ("vec_times_batched", (4,), (2, 4, 3))):
        d = Draw(f.generator(name))
        f.add(name, "matmul", {}, [Input("a", d.normal(*a_shape)), Input("b", d.normal(*b_shape))],
              torch.matmul)
    for name, x_shape, bias in (("linear", (5, 4), True), ("linear_no_bias", (5, 4), False),
                                ("linear_3d", (2, 3, 4), True)):
        d = Draw(f.generator(name))
        inputs = [Input("x", d.normal(*x_shape)), Input("weight", d.normal(3, 4))]
        if bias:
            inputs.append(Input("bias", d.normal(3)))
        f.add(name, "linear", {}, inputs, F.linear)
    return f


def conv():
    f = Family("conv")

    def case(name, x_shape, w_shape, bias=True, stride=(1, 1), padding=(0, 0), dilation=(1, 1),
             groups=1):
        d = Draw(f.generator(name))
        inputs = [Input("x", d.normal(*x_shape)), Input("weight", d.normal(*w_shape, scale=0.5))]
        if bias:
            inputs.append(Input("bias", d.normal(w_shape[0])))
        attrs = {"stride": list(stride), "padding": list(padding), "dilation": list(dilation),
                 "groups": groups}
        f.add(name, "conv2d", attrs, inputs,
              lambda x, w, b=None: F.conv2d(x, w, b, stride, padding, dilation, groups))

    case("basic", (2, 3, 6, 6), (4, 3, 3, 3))
    case("no_bias", (2, 3, 5, 5), (4, 3, 3, 3), bias=False)
    case("stride2", (2, 2, 7, 7), (3, 2, 3, 3), stride=(2, 2))
    case("padding1", (1, 2, 5, 5), (3, 2, 3, 3), padding=(1, 1))
    case("dilation2", (1, 2, 7, 7), (3, 2, 3, 3), dilation=(2, 2))
    case("groups2", (2, 4, 5, 5), (6, 2, 3, 3), groups=2)
    case("depthwise", (1, 3, 5, 5), (3, 1, 3, 3), groups=3, padding=(1, 1))
    case("rect_mixed", (2, 2, 6, 7), (4, 2, 2, 3), stride=(2, 1), padding=(1, 2),
         dilation=(1, 2))
    case("pointwise", (2, 3, 4, 4), (5, 3, 1, 1))
    case("all_attrs", (2, 4, 9, 8), (4, 2, 3, 3), stride=(2, 3), padding=(2, 1), dilation=(2, 1),
         groups=2)
    return f


def dilated_avg_pool(x, k, s, p, dl, count_include_pad):
    """Mean of each window's taps dl apart; the divisor counts the taps on padding too (all k0 k1
    of them: a floor-mode window never passes the padded image) or only those on the input."""
    n, c, h, w = x.shape
    ho = (h + 2 * p[0] - dl[0] * (k[0] - 1) - 1) // s[0] + 1
    wo = (w + 2 * p[1] - dl[1] * (k[1] - 1) - 1) // s[1] + 1
    taps = F.unfold(x, k, dilation=dl, padding=p, stride=s).view(n, c, k[0] * k[1], ho * wo)
    if count_include_pad:
        count = k[0] * k[1]
    else:
        count = F.unfold(torch.ones(1, 1, h, w, dtype=x.dtype), k, dilation=dl, padding=p,
                         stride=s).sum(1)
    return (taps.sum(2) / count).view(n, c, ho, wo)


def pool():
    f = Family("pool")

    def case(name, op, attrs, shape, fn):
        x = Draw(f.generator(name)).normal(*shape)
        f.add(name, op, attrs, [Input("x", x)], fn)

    for name, k, s, p, dl, shape in (("k2", (2, 2), (), (0, 0), (1, 1), (2, 3, 6, 6)),
                                     ("k3_s2_p1", (3, 3), (2, 2), (1, 1), (1, 1), (1, 2, 7, 7)),
                                     ("k2_s1", (2, 2), (1, 1), (0, 0), (1, 1), (1, 2, 4, 5)),
                                     ("dilation2", (2, 2), (1, 1), (0, 0), (2, 2), (1, 2, 6, 6)),
                                     ("rect", (2, 3), (2, 1), (1, 1), (1, 1), (2, 1, 5, 6))):
        case("max_pool2d_" + name, "max_pool2d",
             {"kernel": list(k), "stride": list(s), "padding": list(p), "dilation": list(dl)},
             shape, lambda x, k=k, s=s, p=p, dl=dl: F.max_pool2d(x, k, s or None, p, dl))
    for name, k, s, p, cip, shape in (("k2", (2, 2), (), (0, 0), True, (2, 3, 6, 6)),
                                      ("k3_s2_p1_include_pad", (3, 3), (2, 2), (1, 1), True,
                                       (1, 2, 7, 7)),
                                      ("k3_s2_p1_exclude_pad", (3, 3), (2, 2), (1, 1), False,
                                       (1, 2, 7, 7)),
                                      ("rect", (2, 3), (1, 2), (0, 1), True, (2, 1, 5, 6))):
        case("avg_pool2d_" + name, "avg_pool2d",
             {"kernel": list(k), "stride": list(s), "padding": list(p), "count_include_pad": cip},
             shape, lambda x, k=k, s=s, p=p, cip=cip: F.avg_pool2d(
                 x, k, s or None, p, count_include_pad=cip))
    # torch's avg_pool2d has no dilation: the reference sums the taps that unfold gathers.
    for name, k, s, p, dl, cip, shape in (
            ("dilation2_include_pad", (3, 3), (2, 1), (2, 1), (2, 2), True, (1, 2, 9, 8)),
            ("dilation2_exclude_pad", (3, 3), (2, 1), (2, 1), (2, 2), False, (1, 2, 9, 8)),
            ("rect_dilation", (2, 3), (1, 2), (1, 0), (3, 1), False, (2, 1, 7, 6))):
        case("avg_pool2d_" + name, "avg_pool2d",
             {"kernel": list(k), "stride": list(s), "padding": list(p), "count_include_pad": cip,
              "dilation": list(dl)},
             shape, lambda x, k=k, s=s, p=p, dl=dl, cip=cip: dilated_avg_pool(x, k, s, p, dl, cip))
    for name, out, shape in (("divisible", (2, 2), (2, 3, 6, 4)),
                             ("uneven", (3, 2), (1, 2, 5, 7)),  # overlapping windows
                             ("global", (1, 1), (2, 3, 4, 5)),
                             ("upsample", (4, 3), (1, 1, 3, 2))):  # more outputs than inputs
        case("adaptive_avg_pool2d_" + name, "adaptive_avg_pool2d", {"output_size": list(out)},
             shape, lambda x, out=out: F.adaptive_avg_pool2d(x, out))
    return f


def norm():
    f = Family("norm")
    for name, shape, norm_shape, affine, eps in (
            ("last_dim", (4, 6), (6,), True, 1e-5),
            ("last_two_dims", (2, 3, 4, 5), (4, 5), True, 1e-5),
            ("no_affine", (3, 8), (8,), False, 1e-5),
            ("eps_0.1", (2, 3, 4), (4,), True, 0.1)):
        d = Draw(f.generator("layer_norm_" + name))
        inputs = [Input("x", d.normal(*shape, scale=2.0) + 0.5)]
        if affine:
            inputs += [Input("weight", d.normal(*norm_shape)), Input("bias", d.normal(*norm_shape))]
        f.add("layer_norm_" + name, "layer_norm", {"normalized_shape": list(norm_shape), "eps": eps},
              inputs, lambda x, w=None, b=None, ns=norm_shape, eps=eps: F.layer_norm(
                  x, ns, w, b, eps))
    # Outputs: y, then running_mean and running_var after the call (state: updated in place in
    # training, unchanged in eval). PyTorch updates running_var with the unbiased batch variance.
    for name, shape, training, momentum, eps in (
            ("train_2d", (6, 3), True, 0.1, 1e-5),
            ("train_4d", (3, 2, 4, 3), True, 0.1, 1e-5),
            ("train_momentum0.3_eps0.01", (4, 3, 2, 2), True, 0.3, 1e-2),
            ("eval_2d", (5, 3), False, 0.1, 1e-5),
            ("eval_4d", (2, 3, 3, 4), False, 0.1, 1e-5)):
        d = Draw(f.generator("batch_norm_" + name))
        c = shape[1]
        inputs = [Input("x", d.normal(*shape, scale=1.5) + 0.3),
                  Input("running_mean", d.normal(c, scale=0.5), grad=False),
                  Input("running_var", d.uniform(0.5, 2.0, c), grad=False),
                  Input("weight", d.normal(c)), Input("bias", d.normal(c))]

        def bn(x, rm, rv, w, b, training=training, momentum=momentum, eps=eps):
            y = F.batch_norm(x, rm, rv, w, b, training, momentum, eps)
            return [y, rm, rv]
        f.add("batch_norm_" + name, "batch_norm",
              {"training": training, "momentum": momentum, "eps": eps}, inputs, bn, state_outputs=2)
    # Dropout draws random numbers, so only its deterministic settings have a PyTorch answer.
    for name, p, training in (("eval", 0.5, False), ("train_p0", 0.0, True)):
        x = Draw(f.generator("dropout_" + name)).normal(3, 4)
        f.add("dropout_" + name, "dropout", {"p": p, "training": training}, [Input("x", x)],
              lambda x, p=p, t=training: F.dropout(x, p, t))
    return f


def loss():
    f = Family("loss")

    def class_case(name, op, shape, reduction="mean", ignore_index=-100, smoothing=None,
                   n_ignored=0):
        d = Draw(f.generator(name))
        n, c = shape[0], shape[1]
        x = d.normal(*shape, scale=1.5)
        target = d.ints(0, c, n, *shape[2:])
        if n_ignored:  # mark the first few (flat) targets ignored
            target.view(-1)[:n_ignored] = ignore_index
        attrs = {"ignore_index": ignore_index, "reduction": reduction}
        if op == "cross_entropy":
            attrs["label_smoothing"] = smoothing or 0.0
            fn = lambda x, t: F.cross_entropy(x, t, ignore_index=ignore_index,  # noqa: E731
                                              reduction=reduction,
                                              label_smoothing=smoothing or 0.0)
        else:
            fn = lambda x, t: F.nll_loss(x, t, ignore_index=ignore_index,  # noqa: E731
                                         reduction=reduction)
        f.add(name, op, attrs, [Input("input", x), Input("target", target)], fn)

    for op in ("cross_entropy", "nll_loss"):
        for r in REDUCTIONS:
            class_case(f"{op}_{r}", op, (5, 4), reduction=r)
        class_case(f"{op}_ignore_default", op, (6, 3), n_ignored=2)
        class_case(f"{op}_ignore_index1_sum", op, (6, 4), reduction="sum", ignore_index=1,
                   n_ignored=2)
        class_case(f"{op}_ignore_none", op, (5, 3), reduction="none", n_ignored=1)
        class_case(f"{op}_spatial", op, (2, 4, 3), reduction="mean")  # (N, C, d)
        class_case(f"{op}_spatial_2d_ignore", op, (2, 3, 2, 2), n_ignored=3)
    class_case("cross_entropy_smoothing0.1", "cross_entropy", (5, 4), smoothing=0.1)
    class_case("cross_entropy_smoothing0.2_sum", "cross_entropy", (5, 4), reduction="sum",
               smoothing=0.2)
    class_case("cross_entropy_smoothing0.1_none", "cross_entropy", (4, 3), reduction="none",
               smoothing=0.1)
    class_case("cross_entropy_smoothing0.1_ignore", "cross_entropy", (6, 4), smoothing=0.1,
               n_ignored=2)
    class_case("cross_entropy_smoothing0.3_spatial", "cross_entropy", (2, 3, 4), smoothing=0.3)

    for r in REDUCTIONS:
        d = Draw(f.generator("mse_loss_" + r))
        f.add("mse_loss_" + r, "mse_loss", {"reduction": r},
              [Input("input", d.normal(3, 4)), Input("target", d.normal(3, 4))],
              lambda x, t, r=r: F.mse_loss(x, t, reduction=r))
        d = Draw(f.generator("bce_with_logits_" + r))
        f.add("binary_cross_entropy_with_logits_" + r, "binary_cross_entropy_with_logits",
              {"reduction": r},
              [Input("input", d.normal(3, 4, scale=2.0)),
               Input("target", d.uniform(0.0, 1.0, 3, 4), grad=False)],
              lambda x, t, r=r: F.binary_cross_entropy_with_logits(x, t, reduction=r))
    # The target is differentiable too (d/dt = -x per element, scaled by the reduction).
    d = Draw(f.generator("bce_with_logits_target_grad"))
    f.add("binary_cross_entropy_with_logits_target_grad", "binary_cross_entropy_with_logits",
          {"reduction": "mean"},
          [Input("input", d.normal(2, 5, scale=2.0)), Input("target", d.uniform(0.0, 1.0, 2, 5))],
          lambda x, t: F.binary_cross_entropy_with_logits(x, t))
    # Large logits: the naive log(sigmoid(x)) overflows.
    d = Draw(f.generator("bce_with_logits_large"))
    x = torch.tensor([[-60.0, -20.0, 0.0, 25.0, 80.0]])
    f.add("binary_cross_entropy_with_logits_large", "binary_cross_entropy_with_logits",
          {"reduction": "sum"}, [Input("input", x), Input("target", d.uniform(0.0, 1.0, 1, 5))],
          lambda x, t: F.binary_cross_entropy_with_logits(x, t, reduction="sum"))
    return f


FAMILIES = [matmul, conv, pool, norm, loss]
