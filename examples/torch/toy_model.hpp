#pragma once
/// The ToyModel of PyTorch's "Getting Started with Distributed Data Parallel" tutorial:
///   net1 = Linear(10, 10), relu, net2 = Linear(10, 5)
/// used by demo_basic.cpp and demo_checkpoint.cpp.
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

namespace demo {

class ToyModelImpl : public torch::nn::Module {
 public:
  ToyModelImpl()
      : net1_(register_module("net1", torch::nn::Linear(10, 10))),
        net2_(register_module("net2", torch::nn::Linear(10, 5))) {}

  torch::Tensor forward(torch::Tensor x) { return net2_->forward(torch::relu(net1_->forward(x))); }

 private:
  torch::nn::Linear net1_;
  torch::nn::Linear net2_;
};
TORCH_MODULE(ToyModel);

}  // namespace demo
