#include "fashion_data.hpp"

#include <stdexcept>
#include <string>

#include "idx_reader.hpp"

namespace fashion {

Split load_split(const std::filesystem::path& dir, Part part, std::int64_t limit) {
  const std::string prefix = part == Part::train ? "train" : "t10k";
  const auto images_path = dir / (prefix + "-images-idx3-ubyte.gz");
  const auto labels_path = dir / (prefix + "-labels-idx1-ubyte.gz");
  IdxArray images = read_idx_gz(images_path, limit);
  IdxArray labels = read_idx_gz(labels_path, limit);

  if (images.shape.size() != 3 || images.shape[1] != 28 || images.shape[2] != 28) {
    throw std::runtime_error(images_path.string() + ": expected images of 28x28 pixels (an IDX file of 3 dimensions)");
  }
  if (labels.shape.size() != 1) throw std::runtime_error(labels_path.string() + ": expected 1 dimension of labels");
  if (images.shape[0] != labels.shape[0]) {
    throw std::runtime_error(images_path.string() + " holds " + std::to_string(images.shape[0]) + " images but " +
                             labels_path.string() + " " + std::to_string(labels.shape[0]) + " labels");
  }
  for (std::uint8_t label : labels.data) {
    if (label >= kClasses) {
      throw std::runtime_error(labels_path.string() + ": label " + std::to_string(label) + " is not a class 0..9");
    }
  }

  const std::int64_t n = images.shape[0];
  Split split;
  // from_blob views the vectors; the conversions copy, so the vectors may go.
  split.images = torch::from_blob(images.data.data(), {n, 1, 28, 28}, torch::kUInt8)
                     .to(torch::kFloat32)
                     .div_(255.0)
                     .sub_(kMean)
                     .div_(kStd);
  split.labels = torch::from_blob(labels.data.data(), {n}, torch::kUInt8).to(torch::kInt64);
  return split;
}

}  // namespace fashion
