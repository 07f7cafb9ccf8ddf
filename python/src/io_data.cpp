// smelt.io (safetensors checkpoints of tensors, modules, optimizers) and smelt.data (datasets,
// the digits data set, the data loader).
#include "bind.h"

namespace smelt::python {

namespace {

io::Metadata metadata_arg(py::handle obj) {
  if (obj.is_none()) return {};
  try {
    return obj.cast<io::Metadata>();
  } catch (py::cast_error&) {
    throw py::type_error("metadata: expected a dict of str to str");
  }
}

py::tuple batch_tuple(const data::Batch& b) { return py::make_tuple(b.inputs, b.targets); }

// Python's iteration over a loader: one epoch, begun by iter().
struct LoaderIterator {
  data::DataLoader* loader;
  int64_t next = 0;
};

}  // namespace

void bind_io_data(py::module_& m) {
  py::module_ io = m.def_submodule("io", "safetensors checkpoints");
  io.def("save_safetensors", [](const std::string& path, const StateDict& tensors, py::handle metadata) {
    io::save_safetensors(path, tensors, metadata_arg(metadata));
  }, py::arg("path"), py::arg("tensors"), py::arg("metadata") = py::none());
  io.def("load_safetensors", [](const std::string& path, bool with_metadata) -> py::object {
    io::Metadata meta;
    StateDict tensors = io::load_safetensors(path, &meta);
    if (with_metadata) return py::make_tuple(tensors, meta);
    return py::cast(tensors);
  }, py::arg("path"), py::arg("with_metadata") = false,
     "Every tensor in the file, by name (and the metadata dict when with_metadata).");
  io.def("save_module", [](const std::string& path, const nn::Module& mod, py::handle metadata) {
    io::save_module(path, mod, metadata_arg(metadata));
  }, py::arg("path"), py::arg("module"), py::arg("metadata") = py::none());
  io.def("load_module", &io::load_module, py::arg("path"), py::arg("module"), py::arg("strict") = true);
  io.def("save_optimizer", [](const std::string& path, const optim::Optimizer& o, py::handle metadata) {
    io::save_optimizer(path, o, metadata_arg(metadata));
  }, py::arg("path"), py::arg("optimizer"), py::arg("metadata") = py::none());
  io.def("load_optimizer", &io::load_optimizer, py::arg("path"), py::arg("optimizer"));
  io.def("save_checkpoint", [](const std::string& path, const nn::Module& mod, const optim::Optimizer& o,
                               py::handle metadata) {
    io::save_checkpoint(path, mod, o, metadata_arg(metadata));
  }, py::arg("path"), py::arg("module"), py::arg("optimizer"), py::arg("metadata") = py::none());
  io.def("load_checkpoint", [](const std::string& path, nn::Module& mod, optim::Optimizer& o) {
    io::Metadata meta;
    io::load_checkpoint(path, mod, o, &meta);
    return meta;
  }, py::arg("path"), py::arg("module"), py::arg("optimizer"), "Loads both; returns the file's metadata.");

  py::module_ d = m.def_submodule("data", "datasets, the digits data set, the data loader");
  py::class_<data::Dataset, std::shared_ptr<data::Dataset>>(d, "Dataset")
      .def("__len__", &data::Dataset::size)
      .def("__getitem__", [](const data::Dataset& ds, int64_t i) {
        const int64_t n = ds.size();
        if (i < -n || i >= n) throw py::index_error("dataset index " + std::to_string(i) + " out of range");
        data::Example e = ds.get(i < 0 ? i + n : i);
        return py::make_tuple(e.input, e.target);
      })
      .def("get_batch", [](const data::Dataset& ds, const std::vector<int64_t>& idx) {
        return batch_tuple(ds.get_batch(idx));
      }, py::arg("indices"));
  py::class_<data::TensorDataset, data::Dataset, std::shared_ptr<data::TensorDataset>>(d, "TensorDataset")
      .def(py::init<const Tensor&, const Tensor&>(), py::arg("inputs"), py::arg("targets"))
      .def_property_readonly("inputs", &data::TensorDataset::inputs)
      .def_property_readonly("targets", &data::TensorDataset::targets);
  py::class_<data::Subset, data::Dataset, std::shared_ptr<data::Subset>>(d, "Subset")
      .def(py::init([](std::shared_ptr<data::Dataset> ds, std::vector<int64_t> idx) {
             return std::make_shared<data::Subset>(std::move(ds), std::move(idx));
           }),
           py::arg("dataset"), py::arg("indices"))
      .def_property_readonly("indices", &data::Subset::indices);
  d.def("default_data_dir", &data::default_data_dir);
  d.def("load_digits", [](std::optional<std::string> path) {
    return data::load_digits(path.value_or(data::default_data_dir() + "/digits.csv.gz"));
  }, py::arg("path") = py::none(),
     "The UCI 8x8 digits: inputs float32 (N, 64) with values 0..16, targets int64 (N).");
  d.def("random_split", [](std::shared_ptr<data::Dataset> ds, std::vector<int64_t> lengths, uint64_t seed) {
    return data::random_split(std::move(ds), lengths, seed);
  }, py::arg("dataset"), py::arg("lengths"), py::arg("seed") = 0);
  d.def("train_test_split", [](std::shared_ptr<data::Dataset> ds, double fraction, uint64_t seed) {
    return data::train_test_split(std::move(ds), fraction, seed);
  }, py::arg("dataset"), py::arg("train_fraction") = 0.8, py::arg("seed") = 0);

  py::class_<LoaderIterator>(d, "_LoaderIterator")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", [](LoaderIterator& it) {
        if (it.next >= it.loader->num_batches()) throw py::stop_iteration();
        return batch_tuple(it.loader->batch(it.next++));
      });
  py::class_<data::DataLoader>(d, "DataLoader", "for inputs, targets in loader: ... (each iter() is a new epoch)")
      .def(py::init([](std::shared_ptr<data::Dataset> ds, int64_t batch_size, bool shuffle, bool drop_last,
                       uint64_t seed, int64_t num_shards, int64_t shard) {
             return new data::DataLoader(std::move(ds), {batch_size, shuffle, drop_last, seed, num_shards, shard});
           }),
           py::arg("dataset"), py::arg("batch_size") = 1, py::arg("shuffle") = false, py::arg("drop_last") = false,
           py::arg("seed") = 0, py::arg("num_shards") = 1, py::arg("shard") = 0,
           "num_shards/shard: data-parallel training's rank `shard` of `num_shards` gets a disjoint "
           "1/num_shards of each epoch (smelt.distributed)")
      .def("__len__", &data::DataLoader::num_batches)
      .def("__iter__", [](data::DataLoader& l) {
        l.begin();  // starts the epoch (a new shuffle)
        return LoaderIterator{&l};
      }, py::keep_alive<0, 1>())
      .def_property_readonly("epoch", &data::DataLoader::epoch)
      .def("set_epoch", &data::DataLoader::set_epoch, py::arg("epoch"));
}

}  // namespace smelt::python
