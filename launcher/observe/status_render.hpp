#pragma once
/// How the console shows a node's status: the block at the bottom of a terminal (a title, a column
/// header, a line per rank) and the one-line summary for a console that is not a terminal
/// (`--status-interval`). Pure: NodeStatus in, text out; the console writer draws it.
///
///   ddprun status, attempt 0: 4 ranks, 3 running, 1 straggler; 38.4k samples/s
///   rank state         step  samples/s  cpu%     rss   out  text
///      0 running       1204       9.6k   99%   12.3M    0s  epoch 1 loss 0.31
///      3 straggler      602       4.8k   51%   12.3M    1s  epoch 1 loss 0.33
///
/// When a rank has GPUs (NVML), a "gpu" column after rss says the one worth seeing (gpu_cell), and
/// the node's gpu_note, when it has one, is the block's last line.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "launcher/observe/job_status.hpp"

namespace ddprun::launcher {

/// A count for a narrow column: "950", "9.6k", "96k", "1.2M", "-" for a negative value.
std::string format_count(double value);
/// Bytes in binary units: "512B", "12.3M", "1.2G".
std::string format_bytes(std::uint64_t bytes);
/// An age: "0s", "59s", "12m", "3h"; "-" for a negative one (none).
std::string format_age(double seconds);
/// The state word the block shows: rank_state_name, but "straggler" for a running straggler and
/// "gpu straggler" for a running rank that is only a GPU straggler (its step rate is the nearer
/// measure of being behind, so a rank that is both is a "straggler").
std::string shown_state(const RankStatus& rank);

/// The GPU a rank's cell shows, or nullptr when it has none. Of the GPUs it holds memory on (its
/// own processes, by NVML's process list; all of its GPUs when that names none), the first with a
/// health problem, else the first. A rank that sees every GPU (no CUDA_VISIBLE_DEVICES, as under
/// torchrun) thus shows the one it works on, not always GPU 0.
const RankGpu* shown_gpu(const RankStatus& rank);

/// A rank's GPUs in one short ASCII cell; "" when it has none. For shown_gpu: its utilisation,
/// memory used/total in GiB and temperature, "-" for each NVML did not give:
///   "97% 61/80G 71C"   "- 0.5/16G -"   "97% 61/80G 83C thr xid79"   "LOST"   "12% 2.0/80G 40C +7"
/// " thr": a clock throttle reason is active; " xid79": Xids were seen on it, the last was 79;
/// a health problem replaces all that (gpu_problem_word); " +7": it sees 7 more GPUs.
std::string gpu_cell(const RankStatus& rank);

/// A GPU's health problem (RankGpu::problem, gpu/gpu_state.hpp's reasons) in one word: "LOST"
/// (GPU_IS_LOST), "RESET" (RESET_REQUIRED), "RETIRED" (retired pages pending), "ECC"
/// (uncorrectable errors), "REMAP" (row remapping pending); "UNHEALTHY" for another reason.
std::string gpu_problem_word(const std::string& problem);

/// The status block for a terminal `columns` wide, at most `max_rows` lines (3 at least: the title,
/// the header and a line). When the ranks do not fit, the ranks worth seeing first (failed,
/// stopped, stragglers, then the lowest ranks) are shown in rank order and a last line says how
/// many more there are. Lines are cut to `columns - 1` columns (no wrap in the last column);
/// `color` adds SGR colours (the title bold, failed red, stragglers yellow). A rank's progress text
/// is the worker's: its control characters are shown in caret notation (terminal_safe_line).
std::vector<std::string> render_status_block(const NodeStatus& node, std::size_t columns, std::size_t max_rows, bool color);

/// One compact line (no newline, no colour) for logs: the states, each rank's step (min, median
/// and max past 16 ranks), the node's samples/s, CPU and RSS, and the stragglers:
///   status: 4 running; step 0:1204 1:1199 2:1210 3:602; 38.4k samples/s; cpu 396%; rss 49.2M; stragglers: 3
/// With GPUs, each rank's GPU utilisation the same way (its shown_gpu), the GPU stragglers, the
/// ranks whose GPU has a problem, and the node's gpu_note:
///   ...; gpu 0:97% 1:96% 2:12% 3:-; gpu stragglers: 2; gpu problems: 3:LOST; gpu: NVML stalled: ...
std::string render_status_line(const NodeStatus& node);

}  // namespace ddprun::launcher
