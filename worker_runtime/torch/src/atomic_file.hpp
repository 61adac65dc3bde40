#pragma once
/// Replacing a file so that readers, and a crash at any moment, see the old content or the new,
/// never a mix or a truncated file.
#include <filesystem>
#include <string_view>

namespace ddprun::torch::detail {

/// Writes `content` to a temporary file in `path`'s folder (created when missing), fsyncs it,
/// renames it over `path` and fsyncs the folder, so the rename itself survives a power loss.
/// On failure removes the temporary file and throws ddprun::Error naming the step, the path and
/// errno's text.
void write_file_atomically(const std::filesystem::path& path, std::string_view content);

}  // namespace ddprun::torch::detail
