// Everything smelt offers, in one include.
#pragma once

#include "smelt/autograd.h"
#include "smelt/creation.h"
#include "smelt/dtype.h"
#include "smelt/error.h"
#include "smelt/ops.h"
#include "smelt/tensor.h"
