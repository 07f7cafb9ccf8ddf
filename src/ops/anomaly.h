// Anomaly detection's check (include/smelt/monitor.h), run by the dispatcher after each eager op
// while detection is on.
#pragma once

#include <vector>

#include "ops/op_table.h"

namespace smelt::ops {

bool anomaly_detection_on();
// Records `op` when an output holds a NaN or an infinity and every floating input is finite.
void check_anomaly(OpId op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs);
// Whether every element of a floating tensor is finite (true for other dtypes).
bool all_finite(const Tensor& t);

}  // namespace smelt::ops
