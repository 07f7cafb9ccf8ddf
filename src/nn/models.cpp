#include "smelt/models.h"

namespace smelt::models {

std::shared_ptr<nn::Sequential> digits_cnn() {
  nn::Conv2d::Options same;
  same.padding = {1, 1};
  return std::make_shared<nn::Sequential>(std::vector<nn::ModulePtr>{
      std::make_shared<nn::Conv2d>(1, 16, std::vector<int64_t>{3, 3}, same),
      std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Conv2d>(16, 32, std::vector<int64_t>{3, 3}, same),
      std::make_shared<nn::ReLU>(),
      std::make_shared<nn::MaxPool2d>(std::vector<int64_t>{2, 2}),
      std::make_shared<nn::Flatten>(),
      std::make_shared<nn::Linear>(32 * 4 * 4, 64),
      std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(64, 10),
  });
}

}  // namespace smelt::models
