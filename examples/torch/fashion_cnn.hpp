#pragma once
/// The Fashion-MNIST classifier of examples/torch/fashion_mnist.cpp (and, layer for layer, of
/// fashion_mnist_ddp.py, the Python anchor of the training benchmark):
///
///   input 1x28x28 -> conv 3x3 (pad 1) 1->16, ReLU, max-pool 2 -> 16x14x14
///                 -> conv 3x3 (pad 1) 16->32, ReLU, max-pool 2 -> 32x7x7
///                 -> flatten 1568, dropout 0.25 -> linear 1568->10 (logits)
///
/// 20,490 parameters; the convolutions run channels-last (see the constructor). Chosen for a 2-core
/// CPU with Debian's LibTorch, whose convolutions run on oneDNN but whose matrix products go to the
/// reference BLAS: a hidden layer of 1600->128 alone would cost more than this whole model. Adam at
/// lr 2e-3 and a global batch of 128 reach about 0.89 test accuracy after 2 epochs.
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/pooling.h>
#include <torch/utils.h>

namespace fashion {

class FashionCNNImpl : public torch::nn::Module {
 public:
  FashionCNNImpl()
      : conv1_(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 3).padding(1)))),
        conv2_(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 3).padding(1)))),
        dropout_(register_module("dropout", torch::nn::Dropout(0.25))),
        fc_(register_module("fc", torch::nn::Linear(32 * 7 * 7, 10))) {
    // Channels-last (NHWC) layout for the convolutions: the same math, and on Debian's LibTorch a
    // step takes about a third less time, mostly because its NCHW max-pooling kernel is slow.
    torch::NoGradGuard no_grad;
    for (torch::Tensor* weight : {&conv1_->weight, &conv2_->weight}) {
      // Copied into a tensor allocated channels-last: .contiguous(ChannelsLast) would keep conv1's
      // {16, 1, 3, 3} as it is (with one input channel both layouts count as contiguous), and the
      // convolutions would then produce NCHW outputs.
      weight->set_data(torch::empty_like(*weight, {}, torch::MemoryFormat::ChannelsLast).copy_(*weight));
    }
  }

  /// {n, 1, 28, 28} normalized images -> {n, 10} logits.
  torch::Tensor forward(torch::Tensor x) {
    namespace F = torch::nn::functional;
    x = x.contiguous(torch::MemoryFormat::ChannelsLast);
    x = F::max_pool2d(torch::relu(conv1_->forward(x)), F::MaxPool2dFuncOptions(2));
    x = F::max_pool2d(torch::relu(conv2_->forward(x)), F::MaxPool2dFuncOptions(2));
    return fc_->forward(dropout_->forward(x.flatten(1)));
  }

 private:
  torch::nn::Conv2d conv1_;
  torch::nn::Conv2d conv2_;
  torch::nn::Dropout dropout_;
  torch::nn::Linear fc_;
};
TORCH_MODULE(FashionCNN);

}  // namespace fashion
