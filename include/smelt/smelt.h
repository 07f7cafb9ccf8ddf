// Everything smelt offers, in one include.
#pragma once

#include "smelt/autograd.h"
#include "smelt/creation.h"
#include "smelt/data.h"
#include "smelt/dtype.h"
#include "smelt/error.h"
#include "smelt/graph.h"
#include "smelt/models.h"
#include "smelt/io.h"
#include "smelt/nn.h"
#include "smelt/ops.h"
#include "smelt/optim.h"
#include "smelt/state_dict.h"
#include "smelt/tensor.h"
