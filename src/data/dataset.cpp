// Datasets: stacking examples into batches, TensorDataset, Subset, random splits.
#include <cstring>

#include "smelt/autograd.h"
#include "smelt/creation.h"
#include "smelt/data.h"

namespace smelt::data {

namespace {

// Stacks same-shaped, same-dtype tensors along a new dim 0 by copying (no autograd: data).
Tensor stack_examples(const std::vector<Tensor>& items, const char* what) {
  SMELT_CHECK(!items.empty()) << "Dataset::get_batch: no indices";
  const Tensor& first = items[0];
  Shape shape = first.shape();
  shape.insert(shape.begin(), int64_t(items.size()));
  Tensor out = empty(shape, first.dtype());
  NoGradGuard no_grad;
  for (size_t i = 0; i < items.size(); ++i) {
    SMELT_CHECK(items[i].shape() == first.shape() && items[i].dtype() == first.dtype())
        << "Dataset::get_batch: example " << i << "'s " << what << " is "
        << dtype_name(items[i].dtype()) << " " << shape_str(items[i].shape()) << ", example 0's is "
        << dtype_name(first.dtype()) << " " << shape_str(first.shape())
        << "; a batch needs equal shapes and dtypes";
    out.select(0, int64_t(i)).copy_(items[i]);
  }
  return out;
}

// Rows `indices` of a contiguous tensor, copied into a new (indices.size(), ...) tensor.
Tensor gather_rows(const Tensor& t, const std::vector<int64_t>& indices) {
  Shape shape = t.shape();
  shape[0] = int64_t(indices.size());
  Tensor out = empty(shape, t.dtype());
  const size_t row_bytes =
      size_t(t.numel() / std::max<int64_t>(t.size(0), 1)) * dtype_size(t.dtype());
  const char* src = static_cast<const char*>(t.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  for (size_t i = 0; i < indices.size(); ++i) {
    std::memcpy(dst + i * row_bytes, src + size_t(indices[i]) * row_bytes, row_bytes);
  }
  return out;
}

void check_index(int64_t index, int64_t size, const char* who) {
  SMELT_CHECK(index >= 0 && index < size)
      << who << ": index " << index << " is out of range for a dataset of " << size << " examples";
}

Tensor contiguous_copy_if_needed(const Tensor& t) {
  NoGradGuard no_grad;
  Tensor d = t.detach();
  return d.is_contiguous() ? d : d.contiguous();
}

}  // namespace

Batch Dataset::get_batch(const std::vector<int64_t>& indices) const {
  std::vector<Tensor> inputs, targets;
  inputs.reserve(indices.size());
  targets.reserve(indices.size());
  for (int64_t i : indices) {
    Example e = get(i);
    inputs.push_back(e.input);
    targets.push_back(e.target);
  }
  return {stack_examples(inputs, "input"), stack_examples(targets, "target")};
}

TensorDataset::TensorDataset(const Tensor& inputs, const Tensor& targets) {
  SMELT_CHECK(inputs.defined() && targets.defined() && inputs.dim() >= 1 && targets.dim() >= 1)
      << "TensorDataset: inputs and targets must be defined tensors with a leading example dim";
  SMELT_CHECK(inputs.size(0) == targets.size(0))
      << "TensorDataset: inputs " << shape_str(inputs.shape()) << " and targets "
      << shape_str(targets.shape()) << " hold different numbers of examples";
  inputs_ = contiguous_copy_if_needed(inputs);
  targets_ = contiguous_copy_if_needed(targets);
}

Example TensorDataset::get(int64_t index) const {
  check_index(index, size(), "TensorDataset::get");
  return {inputs_.select(0, index), targets_.select(0, index)};
}

Batch TensorDataset::get_batch(const std::vector<int64_t>& indices) const {
  SMELT_CHECK(!indices.empty()) << "TensorDataset::get_batch: no indices";
  for (int64_t i : indices) check_index(i, size(), "TensorDataset::get_batch");
  return {gather_rows(inputs_, indices), gather_rows(targets_, indices)};
}

Subset::Subset(DatasetPtr dataset, std::vector<int64_t> indices)
    : dataset_(std::move(dataset)), indices_(std::move(indices)) {
  SMELT_CHECK(dataset_ != nullptr) << "Subset: the dataset is null";
  for (int64_t i : indices_) check_index(i, dataset_->size(), "Subset");
}

Example Subset::get(int64_t index) const {
  check_index(index, size(), "Subset::get");
  return dataset_->get(indices_[size_t(index)]);
}

Batch Subset::get_batch(const std::vector<int64_t>& indices) const {
  std::vector<int64_t> mapped;
  mapped.reserve(indices.size());
  for (int64_t i : indices) {
    check_index(i, size(), "Subset::get_batch");
    mapped.push_back(indices_[size_t(i)]);
  }
  return dataset_->get_batch(mapped);
}

std::vector<std::shared_ptr<Subset>> random_split(DatasetPtr dataset,
                                                  const std::vector<int64_t>& lengths,
                                                  uint64_t seed) {
  SMELT_CHECK(dataset != nullptr) << "random_split: the dataset is null";
  int64_t total = 0;
  for (int64_t n : lengths) {
    SMELT_CHECK(n >= 0) << "random_split: lengths must be >= 0, got " << n;
    total += n;
  }
  SMELT_CHECK(total == dataset->size())
      << "random_split: lengths sum to " << total << " but the dataset has " << dataset->size()
      << " examples";
  Generator gen(seed);
  std::vector<double> perm = randperm(total, &gen).to_vector();
  std::vector<std::shared_ptr<Subset>> out;
  int64_t start = 0;
  for (int64_t n : lengths) {
    std::vector<int64_t> indices(perm.begin() + start, perm.begin() + start + n);
    out.push_back(std::make_shared<Subset>(dataset, std::move(indices)));
    start += n;
  }
  return out;
}

std::pair<std::shared_ptr<Subset>, std::shared_ptr<Subset>> train_test_split(DatasetPtr dataset,
                                                                             double train_fraction,
                                                                             uint64_t seed) {
  SMELT_CHECK(dataset != nullptr) << "train_test_split: the dataset is null";
  SMELT_CHECK(train_fraction >= 0.0 && train_fraction <= 1.0)
      << "train_test_split: train_fraction must be in [0, 1], got " << train_fraction;
  const int64_t n = dataset->size();
  const int64_t n_train = int64_t(double(n) * train_fraction);
  auto parts = random_split(dataset, {n_train, n - n_train}, seed);
  return {parts[0], parts[1]};
}

}  // namespace smelt::data
