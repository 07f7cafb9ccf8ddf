// DataLoader: epochs of (optionally shuffled) index batches over a dataset.
#include <numeric>

#include "smelt/creation.h"
#include "smelt/data.h"

namespace smelt::data {

namespace {
// splitmix64: decorrelates the per-epoch seeds derived from (seed, epoch).
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace

DataLoader::DataLoader(DatasetPtr dataset, LoaderOptions options)
    : dataset_(std::move(dataset)), options_(options) {
  SMELT_CHECK(dataset_ != nullptr) << "DataLoader: the dataset is null";
  SMELT_CHECK(options_.batch_size >= 1)
      << "DataLoader: batch_size must be >= 1, got " << options_.batch_size;
  SMELT_CHECK(options_.num_shards >= 1) << "DataLoader: num_shards must be >= 1, got " << options_.num_shards;
  SMELT_CHECK(options_.shard >= 0 && options_.shard < options_.num_shards)
      << "DataLoader: shard " << options_.shard << " is out of range; valid: 0 .. " << options_.num_shards - 1;
}

int64_t DataLoader::shard_size() const {
  const int64_t n = dataset_->size(), k = options_.num_shards;
  return (n + k - 1) / k;
}

int64_t DataLoader::num_batches() const {
  const int64_t n = shard_size(), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

void DataLoader::set_epoch(int64_t epoch) {
  SMELT_CHECK(epoch >= 0) << "DataLoader::set_epoch: epoch must be >= 0, got " << epoch;
  epoch_ = epoch;
}

DataLoader::Iterator DataLoader::begin() {
  const int64_t n = dataset_->size();
  std::vector<int64_t> all;
  if (options_.shuffle) {
    Generator gen(mix(options_.seed ^ mix(uint64_t(epoch_))));
    std::vector<double> perm = randperm(n, &gen).to_vector();
    all.assign(perm.begin(), perm.end());
  } else {
    all.resize(size_t(n));
    std::iota(all.begin(), all.end(), int64_t(0));
  }
  // Shards: the epoch's order wrapped around to a multiple of num_shards, then every
  // num_shards-th example from `shard` on, so that every shard has as many batches.
  const int64_t k = options_.num_shards;
  order_.clear();
  for (int64_t i = options_.shard; i < shard_size() * k; i += k) order_.push_back(all[size_t(i % n)]);
  ++epoch_;
  return Iterator(this, 0);
}

Batch DataLoader::batch(int64_t b) const {
  SMELT_CHECK(b >= 0 && b < num_batches())
      << "DataLoader::batch: batch " << b << " is out of range (" << num_batches() << " per epoch)";
  SMELT_CHECK(int64_t(order_.size()) == shard_size())
      << "DataLoader::batch: no epoch started (call begin()) or the dataset changed size";
  const int64_t start = b * options_.batch_size;
  const int64_t end = std::min<int64_t>(start + options_.batch_size, int64_t(order_.size()));
  std::vector<int64_t> indices(order_.begin() + start, order_.begin() + end);
  return dataset_->get_batch(indices);
}

}  // namespace smelt::data
