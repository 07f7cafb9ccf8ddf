// Learning-rate schedulers: closed-form lr(epoch, base_lr), applied to every parameter group.
#include <cmath>

#include "smelt/optim.h"

namespace smelt::optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (ParamGroup& g : optimizer_.param_groups()) {
    if (!g.initial_lr) g.initial_lr = g.lr;
    base_lrs_.push_back(*g.initial_lr);
  }
}

void LRScheduler::apply() {
  std::vector<ParamGroup>& groups = optimizer_.param_groups();
  SMELT_CHECK(groups.size() == base_lrs_.size())
      << "LRScheduler: the optimizer now has " << groups.size() << " parameter groups, "
      << base_lrs_.size() << " when the scheduler was created";
  for (size_t g = 0; g < groups.size(); ++g) groups[g].lr = lr_at(last_epoch_, base_lrs_[g]);
}

void LRScheduler::step() {
  ++last_epoch_;
  apply();
}

void LRScheduler::set_epoch(int64_t epoch) {
  SMELT_CHECK(epoch >= 0) << "LRScheduler::set_epoch: epoch must be >= 0, got " << epoch;
  last_epoch_ = epoch;
  apply();
}

std::vector<double> LRScheduler::get_last_lr() const {
  std::vector<double> out;
  for (const ParamGroup& g : optimizer_.param_groups()) out.push_back(g.lr);
  return out;
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  SMELT_CHECK(step_size > 0) << "StepLR: step_size must be positive, got " << step_size;
  apply();
}

double StepLR::lr_at(int64_t epoch, double base_lr) const {
  return base_lr * std::pow(gamma_, double(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min)
    : LRScheduler(optimizer), t_max_(t_max), eta_min_(eta_min) {
  SMELT_CHECK(t_max > 0) << "CosineAnnealingLR: t_max must be positive, got " << t_max;
  apply();
}

double CosineAnnealingLR::lr_at(int64_t epoch, double base_lr) const {
  return eta_min_ +
         (base_lr - eta_min_) * (1.0 + std::cos(M_PI * double(epoch) / double(t_max_))) / 2.0;
}

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor,
                   int64_t total_iters)
    : LRScheduler(optimizer),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {
  SMELT_CHECK(start_factor > 0 && start_factor <= 1)
      << "LinearLR: start_factor must be in (0, 1], got " << start_factor;
  SMELT_CHECK(end_factor >= 0 && end_factor <= 1)
      << "LinearLR: end_factor must be in [0, 1], got " << end_factor;
  SMELT_CHECK(total_iters > 0) << "LinearLR: total_iters must be positive, got " << total_iters;
  apply();
}

double LinearLR::lr_at(int64_t epoch, double base_lr) const {
  double progress = double(std::min(epoch, total_iters_)) / double(total_iters_);
  return base_lr * (start_factor_ + (end_factor_ - start_factor_) * progress);
}

SequentialLR::SequentialLR(Optimizer& optimizer, std::vector<const LRScheduler*> schedulers,
                           std::vector<int64_t> milestones)
    : LRScheduler(optimizer),
      schedulers_(std::move(schedulers)),
      milestones_(std::move(milestones)) {
  SMELT_CHECK(!schedulers_.empty() && milestones_.size() + 1 == schedulers_.size())
      << "SequentialLR: needs one milestone fewer than schedulers, got " << schedulers_.size()
      << " schedulers and " << milestones_.size() << " milestones";
  for (size_t k = 0; k < schedulers_.size(); ++k) {
    SMELT_CHECK(schedulers_[k] != nullptr) << "SequentialLR: scheduler " << k << " is null";
    SMELT_CHECK(schedulers_[k]->base_lrs() == base_lrs())
        << "SequentialLR: scheduler " << k << " starts from other base learning rates; all "
        << "schedulers must belong to the same optimizer";
  }
  for (size_t k = 0; k < milestones_.size(); ++k) {
    SMELT_CHECK(milestones_[k] > (k ? milestones_[k - 1] : 0))
        << "SequentialLR: milestones must be positive and increasing, got " << milestones_[k]
        << " at position " << k;
  }
  apply();
}

double SequentialLR::lr_at(int64_t epoch, double base_lr) const {
  size_t k = 0;
  while (k < milestones_.size() && epoch >= milestones_[k]) ++k;
  int64_t start = k ? milestones_[k - 1] : 0;
  return schedulers_[k]->lr_at(epoch - start, base_lr);
}

}  // namespace smelt::optim
