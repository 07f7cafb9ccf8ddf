// The small layers: Dropout, Embedding, Flatten, Sequential, activation parameters.
#include <sstream>

#include "smelt/nn.h"

namespace smelt::nn {

Dropout::Dropout(double p) : p(p) {
  SMELT_CHECK(p >= 0.0 && p <= 1.0) << "Dropout: p must be in [0, 1], got " << p;
}

Tensor Dropout::forward(const Tensor& x) { return dropout(x, p, is_training()); }

std::string Dropout::extra_repr() const {
  std::ostringstream s;
  s << "p=" << p;
  return s.str();
}

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, DType dtype)
    : num_embeddings(num_embeddings), embedding_dim(embedding_dim) {
  SMELT_CHECK(num_embeddings > 0 && embedding_dim > 0)
      << "Embedding: num_embeddings and embedding_dim must be positive, got " << num_embeddings
      << " and " << embedding_dim;
  weight = empty({num_embeddings, embedding_dim}, dtype);
  register_parameter("weight", weight);
  init::normal_(weight, 0.0, 1.0);
}

Tensor Embedding::forward(const Tensor& indices) {
  SMELT_CHECK(indices.dtype() == DType::Int64)
      << "Embedding: indices must be int64, got " << dtype_name(indices.dtype());
  return embedding(indices, weight);
}

std::string Embedding::extra_repr() const {
  std::ostringstream s;
  s << num_embeddings << ", " << embedding_dim;
  return s.str();
}

std::string Flatten::extra_repr() const {
  std::ostringstream s;
  s << "start_dim=" << start_dim << ", end_dim=" << end_dim;
  return s.str();
}

Sequential::Sequential(const std::vector<ModulePtr>& modules) {
  for (const ModulePtr& m : modules) append(m);
}

void Sequential::append(ModulePtr module) {
  register_module(std::to_string(layers_.size()), module);
  layers_.push_back(std::move(module));
}

const ModulePtr& Sequential::operator[](size_t i) const {
  SMELT_CHECK(i < layers_.size()) << "Sequential: index " << i << " out of range for "
                                  << layers_.size() << " layers";
  return layers_[i];
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (const ModulePtr& layer : layers_) y = (*layer)(y);
  return y;
}

std::string GELU::extra_repr() const {
  return approximate == GeluApprox::Tanh ? "approximate='tanh'" : "";
}

std::string LeakyReLU::extra_repr() const {
  std::ostringstream s;
  s << "negative_slope=" << negative_slope;
  return s.str();
}

}  // namespace smelt::nn
