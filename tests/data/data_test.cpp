// Datasets, splits and the data loader.
#include <algorithm>
#include <fstream>
#include <set>

#include "support/check.h"
#include "support/errors.h"
#include "support/temp_dir.h"

namespace smelt {
namespace {

using testing::all_close;
using testing::expect_error;

const std::string kDigits = data::default_data_dir() + "/digits.csv.gz";

TEST(Digits, DefaultDataDirIsCompiledIn) { EXPECT_EQ(data::default_data_dir(), SMELT_DATA_DIR); }

TEST(Digits, Loads1797LabelledImages) {
  auto digits = data::load_digits(kDigits);
  ASSERT_EQ(digits->size(), 1797);
  EXPECT_EQ(digits->inputs().shape(), (Shape{1797, 64}));
  EXPECT_EQ(digits->inputs().dtype(), DType::Float32);
  EXPECT_EQ(digits->targets().shape(), (Shape{1797}));
  EXPECT_EQ(digits->targets().dtype(), DType::Int64);
  std::vector<double> pixels = digits->inputs().to_vector(), labels = digits->targets().to_vector();
  EXPECT_EQ(*std::min_element(pixels.begin(), pixels.end()), 0.0);
  EXPECT_EQ(*std::max_element(pixels.begin(), pixels.end()), 16.0);
  std::vector<int> per_class(10, 0);
  for (double l : labels) {
    ASSERT_TRUE(l >= 0 && l <= 9 && l == double(int(l)));
    ++per_class[size_t(l)];
  }
  for (int c = 0; c < 10; ++c) EXPECT_GT(per_class[size_t(c)], 170) << "class " << c;
  // The first row of the file: a zero.
  const std::vector<double> first_row_start = {0, 0, 5, 13, 9, 1, 0, 0, 0, 0, 13, 15, 10, 15, 5, 0};
  data::Example e = digits->get(0);
  std::vector<double> x = e.input.to_vector();
  EXPECT_EQ(std::vector<double>(x.begin(), x.begin() + 16), first_row_start);
  EXPECT_EQ(e.target.item(), 0.0);
  EXPECT_EQ(digits->get(1).target.item(), 1.0);
}

class DigitsFileTest : public testing::TempDirTest {
 protected:
  std::string path() const { return TempDirTest::path("d.csv.gz"); }
  // zlib reads a file without a gzip header as plain text, so small cases are written as such;
  // the bundled digits file covers the compressed path.
  void write_file(const std::string& bytes) {
    std::remove(path().c_str());
    std::ofstream out(path(), std::ios::binary);
    out.write(bytes.data(), std::streamsize(bytes.size()));
  }
};

std::string row(int pixel, int label, int fields = 64) {
  std::string s;
  for (int i = 0; i < fields; ++i) s += std::to_string(pixel) + ",";
  return s + std::to_string(label) + "\n";
}

TEST_F(DigitsFileTest, SmallValidFile) {
  write_file(row(3, 7) + row(16, 0) + "\n");
  auto d = data::load_digits(path());
  EXPECT_EQ(d->size(), 2);
  EXPECT_EQ(d->targets().to_vector(), (std::vector<double>{7, 0}));
  EXPECT_EQ(d->get(1).input.to_vector(), std::vector<double>(64, 16.0));
}

TEST_F(DigitsFileTest, MalformedFilesAreErrorsWithLineNumbers) {
  write_file(row(1, 1) + row(1, 1, 63));
  expect_error([&] { data::load_digits(path()); }, {path(), "line 2", "64 fields", "expected 65"});
  write_file(row(1, 1) + row(1, 1) + row(1, 1, 65));
  expect_error([&] { data::load_digits(path()); }, {"line 3", "more than 65"});
  write_file(row(17, 1));
  expect_error([&] { data::load_digits(path()); }, {"line 1", "17 is out of range"});
  write_file(row(2, 10));
  expect_error([&] { data::load_digits(path()); }, {"field 65", "10 is out of range"});
  write_file("1,2,x\n");
  expect_error([&] { data::load_digits(path()); }, {"line 1, field 3", "integer"});
  write_file("");
  expect_error([&] { data::load_digits(path()); }, {"no rows"});
  expect_error([&] { data::load_digits(dir_ + "/absent.csv.gz"); },
               {"absent.csv.gz", "cannot open"});
}

TEST_F(DigitsFileTest, TruncatedGzipIsAnError) {
  std::ifstream in(kDigits, std::ios::binary);
  std::string gz(std::istreambuf_iterator<char>(in), {});
  ASSERT_GT(gz.size(), 1000u);
  write_file(gz.substr(0, gz.size() / 2));
  expect_error([&] { data::load_digits(path()); }, {path(), "cannot decompress"});
}

// Inputs (n, 2) = [i, 10 i], targets (n) = i: every batch shows which examples it holds.
std::shared_ptr<data::TensorDataset> tagged(int64_t n) {
  std::vector<double> x;
  std::vector<int64_t> y;
  for (int64_t i = 0; i < n; ++i)
    x.push_back(double(i)), x.push_back(10.0 * double(i)), y.push_back(i);
  return std::make_shared<data::TensorDataset>(from_vector(x, {n, 2}), from_vector(y, {n}));
}

std::vector<int64_t> ids(const data::Batch& b) {
  std::vector<int64_t> out;
  for (double v : b.targets.to_vector()) out.push_back(int64_t(v));
  std::vector<double> x = b.inputs.to_vector();
  for (size_t k = 0; k < out.size(); ++k) {
    EXPECT_EQ(x[2 * k], double(out[k]));
    EXPECT_EQ(x[2 * k + 1], 10.0 * double(out[k]));
  }
  return out;
}

TEST(TensorDataset, GetAndGetBatch) {
  auto ds = tagged(5);
  EXPECT_EQ(ds->size(), 5);
  data::Example e = ds->get(3);
  EXPECT_EQ(e.input.to_vector(), (std::vector<double>{3, 30}));
  EXPECT_EQ(e.target.item(), 3.0);
  data::Batch b = ds->get_batch({4, 0, 4});
  EXPECT_EQ(b.inputs.shape(), (Shape{3, 2}));
  EXPECT_EQ(ids(b), (std::vector<int64_t>{4, 0, 4}));
  expect_error([&] { ds->get(5); }, {"TensorDataset", "index 5"});
  expect_error(
      [&] {
        data::TensorDataset(zeros({3, 2}), zeros({4}));
      },
      {"TensorDataset", "(3, 2)", "(4,)"});
  // A strided input is stored contiguously.
  data::TensorDataset strided(zeros({2, 3}).t(), zeros({3}));
  EXPECT_TRUE(strided.inputs().is_contiguous());
}

// A dataset without its own get_batch: batches are stacked from get().
class Squares : public data::Dataset {
 public:
  int64_t size() const override { return 6; }
  data::Example get(int64_t i) const override {
    return {full({2, 2}, double(i * i)), scalar_tensor(double(i), DType::Int64)};
  }
};

TEST(Dataset, DefaultBatchStacksExamples) {
  Squares sq;
  data::Batch b = sq.get_batch({2, 5});
  EXPECT_EQ(b.inputs.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(b.targets.shape(), (Shape{2}));
  EXPECT_EQ(b.inputs.to_vector(), (std::vector<double>{4, 4, 4, 4, 25, 25, 25, 25}));
  EXPECT_EQ(b.targets.to_vector(), (std::vector<double>{2, 5}));
}

class Ragged : public data::Dataset {
 public:
  int64_t size() const override { return 2; }
  data::Example get(int64_t i) const override { return {zeros({i + 1}), scalar_tensor(0)}; }
};

TEST(Dataset, RaggedExamplesCannotBeBatched) {
  Ragged r;
  expect_error([&] { r.get_batch({0, 1}); }, {"get_batch", "example 1", "(2,)", "(1,)"});
}

TEST(Split, RandomSplitIsASeededPartition) {
  auto ds = tagged(50);
  auto parts = data::random_split(ds, {30, 15, 5}, 123);
  ASSERT_EQ(parts.size(), 3u);
  std::set<int64_t> seen;
  for (const auto& p : parts) {
    for (int64_t i = 0; i < p->size(); ++i) seen.insert(int64_t(p->get(i).target.item()));
  }
  EXPECT_EQ(seen.size(), 50u);
  EXPECT_EQ(parts[1]->size(), 15);
  auto again = data::random_split(ds, {30, 15, 5}, 123);
  EXPECT_EQ(parts[0]->indices(), again[0]->indices());
  auto other = data::random_split(ds, {30, 15, 5}, 124);
  EXPECT_NE(parts[0]->indices(), other[0]->indices());
  // Subset batches map through to the dataset.
  EXPECT_EQ(ids(parts[2]->get_batch({0, 1})),
            (std::vector<int64_t>{parts[2]->indices()[0], parts[2]->indices()[1]}));
  expect_error([&] { data::random_split(ds, {30, 10}, 0); }, {"random_split", "sum to 40", "50"});
}

TEST(Split, TrainTestSplitOfDigitsIs80To20) {
  auto digits = data::load_digits(kDigits);
  auto [train, test] = data::train_test_split(digits);
  EXPECT_EQ(train->size(), 1437);
  EXPECT_EQ(test->size(), 360);
  std::vector<int64_t> all = train->indices();
  all.insert(all.end(), test->indices().begin(), test->indices().end());
  std::sort(all.begin(), all.end());
  for (int64_t i = 0; i < 1797; ++i) ASSERT_EQ(all[size_t(i)], i);
}

TEST(DataLoader, SequentialBatchesAndDropLast) {
  auto ds = tagged(10);
  data::DataLoader loader(ds, {.batch_size = 4});
  EXPECT_EQ(loader.num_batches(), 3);
  std::vector<std::vector<int64_t>> got;
  for (const data::Batch& b : loader) got.push_back(ids(b));
  EXPECT_EQ(got, (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));

  data::DataLoader dropping(ds, {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(dropping.num_batches(), 2);
  int64_t batches = 0;
  for (const data::Batch& b : dropping) {
    EXPECT_EQ(b.inputs.shape(), (Shape{4, 2}));
    ++batches;
  }
  EXPECT_EQ(batches, 2);
  expect_error([&] { data::DataLoader(ds, {.batch_size = 0}); }, {"batch_size"});
}

std::vector<std::vector<int64_t>> epoch(data::DataLoader& loader) {
  std::vector<std::vector<int64_t>> out;
  for (const data::Batch& b : loader) out.push_back(ids(b));
  return out;
}

TEST(DataLoader, ShuffleIsReproducible) {
  auto ds = tagged(23);
  data::DataLoader a(ds, {.batch_size = 5, .shuffle = true, .seed = 7});
  data::DataLoader b(ds, {.batch_size = 5, .shuffle = true, .seed = 7});
  data::DataLoader c(ds, {.batch_size = 5, .shuffle = true, .seed = 8});
  auto a1 = epoch(a), a2 = epoch(a), b1 = epoch(b), b2 = epoch(b), c1 = epoch(c);
  EXPECT_EQ(a1, b1);
  EXPECT_EQ(a2, b2);
  EXPECT_NE(a1, a2);  // a new order each epoch
  EXPECT_NE(a1, c1);  // and per seed
  // Each epoch visits every example once.
  for (const auto& e : {a1, a2, c1}) {
    std::vector<int64_t> flat;
    for (const auto& batch : e) flat.insert(flat.end(), batch.begin(), batch.end());
    std::sort(flat.begin(), flat.end());
    for (int64_t i = 0; i < 23; ++i) ASSERT_EQ(flat[size_t(i)], i);
  }
  EXPECT_EQ(a.epoch(), 2);
  // Resuming at epoch 1 replays that epoch's order.
  data::DataLoader resumed(ds, {.batch_size = 5, .shuffle = true, .seed = 7});
  resumed.set_epoch(1);
  EXPECT_EQ(epoch(resumed), a2);
}

// Shards (data-parallel training): each of k loaders gets a disjoint part of the same epoch order,
// wrapped around so that all have as many batches; together they cover every example.
TEST(DataLoader, ShardsSplitTheEpochOrder) {
  for (int64_t n : {0, 1, 5, 23, 24}) {
    for (int64_t k : {1, 2, 3, 4}) {
      auto ds = tagged(n);
      data::DataLoader whole(ds, {.batch_size = 4, .shuffle = true, .seed = 3});
      whole.begin();
      const std::vector<int64_t> order = whole.order();
      std::vector<int64_t> seen(size_t((n + k - 1) / k * k), -1);
      int64_t batches = -1;
      for (int64_t shard = 0; shard < k; ++shard) {
        data::DataLoader part(ds, {.batch_size = 4, .shuffle = true, .seed = 3, .num_shards = k, .shard = shard});
        const std::vector<std::vector<int64_t>> got = epoch(part);
        if (batches < 0) batches = int64_t(got.size());
        EXPECT_EQ(int64_t(got.size()), batches) << "n " << n << " k " << k << ": shards differ in batches";
        EXPECT_EQ(part.shard_size(), (n + k - 1) / k);
        int64_t at = 0;
        for (const auto& b : got) {
          for (int64_t id : b) {
            const int64_t position = shard + k * at++;
            seen[size_t(position)] = id;
            EXPECT_EQ(id, order[size_t(position % n)]) << "n " << n << " k " << k << " shard " << shard;
          }
        }
      }
      std::set<int64_t> distinct(seen.begin(), seen.end());
      EXPECT_EQ(int64_t(distinct.size()), n) << "n " << n << " k " << k << ": every example in some shard";
    }
  }
  auto ds = tagged(10);
  expect_error([&] { data::DataLoader(ds, {.num_shards = 0}); }, {"num_shards must be >= 1"});
  expect_error([&] { data::DataLoader(ds, {.num_shards = 2, .shard = 2}); }, {"shard 2 is out of range", "0 .. 1"});
  expect_error([&] { data::DataLoader(ds, {.num_shards = 2, .shard = -1}); }, {"out of range"});
}

TEST(DataLoader, DigitsBatches) {
  auto digits = data::load_digits(kDigits);
  auto [train, test] = data::train_test_split(digits, 0.8, 0);
  data::DataLoader loader(train, {.batch_size = 64, .shuffle = true, .seed = 1});
  EXPECT_EQ(loader.num_batches(), 23);  // ceil(1437 / 64)
  int64_t seen = 0;
  for (const data::Batch& b : loader) {
    EXPECT_EQ(b.inputs.size(1), 64);
    EXPECT_EQ(b.inputs.dtype(), DType::Float32);
    EXPECT_EQ(b.targets.dtype(), DType::Int64);
    seen += b.inputs.size(0);
  }
  EXPECT_EQ(seen, 1437);
  // A batch's rows are the dataset's rows.
  data::Batch first = loader.batch(0);
  int64_t original = train->indices()[size_t(loader.order()[0])];
  EXPECT_TRUE(all_close(first.inputs.select(0, 0), digits->get(original).input, 0, 0));
  EXPECT_EQ(first.targets.to_vector()[0], digits->get(original).target.item());
}

}  // namespace
}  // namespace smelt
