// Datasets and a data loader.
//
//   auto digits = data::load_digits(data::default_data_dir() + "/digits.csv.gz");
//   auto [train, test] = data::train_test_split(digits, 0.8, /*seed=*/0);
//   data::DataLoader loader(train, {.batch_size = 32, .shuffle = true, .seed = 1});
//   for (const data::Batch& b : loader) { ... b.inputs (32, 64), b.targets (32) ... }
//
// Shuffling uses smelt's counter-based generator: the same seed gives the same batches on every
// machine, and epoch k's order depends only on (seed, k).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "smelt/tensor.h"

namespace smelt::data {

struct Example {
  Tensor input;
  Tensor target;
};

// Examples stacked along a new leading dim.
struct Batch {
  Tensor inputs;
  Tensor targets;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Example get(int64_t index) const = 0;
  // The examples at `indices`, stacked. The default stacks get(i) one by one; datasets backed by
  // tensors gather rows directly.
  virtual Batch get_batch(const std::vector<int64_t>& indices) const;
};
using DatasetPtr = std::shared_ptr<const Dataset>;

// Example i is (inputs[i], targets[i]). The tensors are kept as contiguous, detached copies
// (or the originals when they already are contiguous).
class TensorDataset : public Dataset {
 public:
  TensorDataset(const Tensor& inputs, const Tensor& targets);
  int64_t size() const override { return inputs_.size(0); }
  Example get(int64_t index) const override;
  Batch get_batch(const std::vector<int64_t>& indices) const override;
  const Tensor& inputs() const { return inputs_; }
  const Tensor& targets() const { return targets_; }

 private:
  Tensor inputs_, targets_;
};

// The examples of `dataset` at `indices`, in that order.
class Subset : public Dataset {
 public:
  Subset(DatasetPtr dataset, std::vector<int64_t> indices);
  int64_t size() const override { return int64_t(indices_.size()); }
  Example get(int64_t index) const override;
  Batch get_batch(const std::vector<int64_t>& indices) const override;
  const std::vector<int64_t>& indices() const { return indices_; }

 private:
  DatasetPtr dataset_;
  std::vector<int64_t> indices_;
};

// The directory holding smelt's bundled data files (compiled in).
std::string default_data_dir();

// The UCI optical handwritten digits (as in scikit-learn's load_digits), read from a gzip CSV
// whose rows are 64 pixel values 0..16 (an 8x8 image, row-major) and then the label 0..9.
// inputs float32 (N, 64) with the raw 0..16 values, targets int64 (N).
std::shared_ptr<TensorDataset> load_digits(const std::string& path);

// Splits a random permutation of the dataset into consecutive pieces of `lengths` (which must sum
// to its size), as PyTorch's random_split; the same seed gives the same split.
std::vector<std::shared_ptr<Subset>> random_split(DatasetPtr dataset,
                                                  const std::vector<int64_t>& lengths,
                                                  uint64_t seed);
// random_split into floor(train_fraction * size) and the rest (80/20 by default).
std::pair<std::shared_ptr<Subset>, std::shared_ptr<Subset>> train_test_split(
    DatasetPtr dataset, double train_fraction = 0.8, uint64_t seed = 0);

struct LoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = false;
  bool drop_last = false;  // drop a final batch smaller than batch_size
  uint64_t seed = 0;       // for shuffling
  // Data-parallel training: the loader of rank `shard` of `num_shards` yields a disjoint
  // 1/num_shards of each epoch (every num_shards-th example of the epoch's order, which every
  // shard computes alike from the seed; wrapped around to a multiple of num_shards so that all
  // have as many batches, as PyTorch's DistributedSampler).
  int64_t num_shards = 1;
  int64_t shard = 0;
};

class DataLoader {
 public:
  DataLoader(DatasetPtr dataset, LoaderOptions options);

  int64_t num_batches() const;  // per epoch
  int64_t shard_size() const;   // examples per epoch (the whole dataset with one shard)
  const LoaderOptions& options() const { return options_; }
  int64_t epoch() const { return epoch_; }  // epochs started so far
  // The next begin() starts epoch `epoch` (for resuming).
  void set_epoch(int64_t epoch);

  class Iterator {
   public:
    Batch operator*() const { return loader_->batch(index_); }
    Iterator& operator++() {
      ++index_;
      return *this;
    }
    bool operator==(const Iterator& o) const { return index_ == o.index_; }
    bool operator!=(const Iterator& o) const { return index_ != o.index_; }

   private:
    friend class DataLoader;
    Iterator(const DataLoader* loader, int64_t index) : loader_(loader), index_(index) {}
    const DataLoader* loader_;
    int64_t index_;
  };
  // Starts a new epoch (a new shuffle when shuffling).
  Iterator begin();
  Iterator end() const { return Iterator(this, num_batches()); }

  // Batch b of the current epoch.
  Batch batch(int64_t b) const;
  // The example order of the current epoch (this shard's).
  const std::vector<int64_t>& order() const { return order_; }

 private:
  DatasetPtr dataset_;
  LoaderOptions options_;
  int64_t epoch_ = 0;
  std::vector<int64_t> order_;
};

}  // namespace smelt::data
