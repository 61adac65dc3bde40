#include "launcher/output_plan.hpp"

namespace ddprun::launcher {
namespace {

StreamPlan plan_stream(bool redirected, bool teed, bool shown, bool explicit_prefix) {
  StreamPlan plan;
  plan.to_file = redirected || teed;
  plan.to_console = (!redirected || teed) && shown;
  plan.prefixed = teed || explicit_prefix;
  return plan;
}

}  // namespace

WorkerOutputPlan plan_output(const LaunchConfig& config, int local_rank) {
  StdStreams redirected = config.redirects.for_local_rank(local_rank);
  StdStreams teed = config.tee.for_local_rank(local_rank);
  bool shown = !config.local_ranks_filter || config.local_ranks_filter->contains(local_rank);
  bool explicit_prefix = !config.log_line_prefix_template.empty();
  WorkerOutputPlan plan{plan_stream(covers_stdout(redirected), covers_stdout(teed), shown, explicit_prefix),
                        plan_stream(covers_stderr(redirected), covers_stderr(teed), shown, explicit_prefix)};
  plan.out.to_filtered_file = covers_stdout(teed) && shown && !config.duplicate_stdout_filters.empty();
  plan.err.to_filtered_file = covers_stderr(teed) && shown && !config.duplicate_stderr_filters.empty();
  return plan;
}

}  // namespace ddprun::launcher
