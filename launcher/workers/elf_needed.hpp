#pragma once
/// The shared libraries an ELF executable names (its DT_NEEDED entries), read from the file's
/// section headers: what the dynamic loader will look for, before any search path is applied.
/// Only the file's own list, not its libraries' (no transitive closure, no ldd): a few small reads.
#include <string>
#include <vector>

namespace ddprun::launcher {

/// The DT_NEEDED names of the 64-bit little-endian ELF file at `path` ("libtorch.so.1.13", ...), in
/// file order; empty for a file that cannot be read, is not such an ELF file (a script, a 32-bit
/// binary), or is linked statically.
std::vector<std::string> elf_needed(const std::string& path);

}  // namespace ddprun::launcher
