// conv2d's geometry from its operand shapes and attributes, checked as the op's shape rule checks
// it (smelt::Error on a bad combination): what the tuner (`smelt tune`) needs to measure the
// convolutions of a graph without running it.
#pragma once

#include "kernels/conv.h"
#include "ops/attrs.h"

namespace smelt::ops {

kernels::Conv2dGeometry conv2d_geometry(const Shape& x /*(N, C, H, W)*/, const Shape& w /*(O, C/groups, kH, kW)*/,
                                        const Attrs& attrs);

}  // namespace smelt::ops
