#pragma once
/// Fashion-MNIST as tensors, from Debian's dataset-fashion-mnist (gzipped IDX files).
///
///   fashion::Split train = fashion::load_split("/usr/share/datasets/fashion-mnist", fashion::Part::train);
///   train.images  // float32 {60000, 1, 28, 28}, normalized: (pixel / 255 - kMean) / kStd
///   train.labels  // int64 {60000}, classes 0..9
#include <cstdint>
#include <filesystem>

#include <torch/types.h>

namespace fashion {

/// Mean and standard deviation of the training pixels scaled to [0, 1] (fashion_mnist_ddp.py too).
inline constexpr double kMean = 0.2860;
inline constexpr double kStd = 0.3530;
inline constexpr int kClasses = 10;

enum class Part { train, test };

struct Split {
  torch::Tensor images;  ///< float32 {n, 1, 28, 28}, normalized
  torch::Tensor labels;  ///< int64 {n}
  std::int64_t size() const { return labels.size(0); }
};

/// Reads <dir>/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz; `limit` >= 0 keeps the first `limit`
/// samples. Throws std::runtime_error naming the file when one is missing or malformed, or when the
/// images and labels do not match (counts, 28x28 images, labels out of 0..9).
Split load_split(const std::filesystem::path& dir, Part part, std::int64_t limit = -1);

}  // namespace fashion
