#pragma once
/// The gloo backend: collectives on CPU memory over gloo's TCP transport, with the full mesh of
/// connections set up through the job's store.
#include <mutex>
#include <memory>
#include <string>

#include "ddprun/process_group.hpp"
#include "gloo_error.hpp"
#include "gloo_peer_watch.hpp"
#include "gloo_work.hpp"
#include "store_adapter.hpp"

namespace gloo {
class Context;
}

namespace ddprun::detail {

class GlooProcessGroup final : public ProcessGroup {
 public:
  /// Connects the full mesh (every rank must call it; TimeoutError naming what was missing when one
  /// does not within options.timeout). A world of one connects nothing.
  GlooProcessGroup(const Identity& identity, const ProcessGroupOptions& options);
  ~GlooProcessGroup() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Backend backend() const override { return Backend::gloo; }

 protected:
  std::shared_ptr<Work> start_all_reduce(Buffer buffer, ReduceOp op) override;
  std::shared_ptr<Work> start_broadcast(Buffer buffer, int root) override;
  std::shared_ptr<Work> start_all_gather(Buffer input, Buffer output) override;
  std::shared_ptr<Work> start_reduce_scatter(Buffer input, Buffer output, ReduceOp op) override;
  std::shared_ptr<Work> start_barrier() override;

 private:
  /// Queues `body(tag)` under the operation's name ("all_reduce #<tag> (<details>)"); a failure
  /// becomes a ddprun error naming the operation and, when it can be told, the peer.
  template <class Body>
  std::shared_ptr<Work> submit(std::string_view name, const std::string& details, Body body);
  void connect(const Identity& identity);
  /// The peer watch's verdict: fail the running operation now (see GlooExecutor::abort), naming
  /// `lost` (-1: unknown) as the cause; `error_for` words it for an operation.
  void abort(int lost, const std::function<std::exception_ptr(const std::string&)>& error_for);

  const int rank_;
  const int size_;
  const std::chrono::milliseconds timeout_;
  // Declaration order is destruction order in reverse (the destructor first shuts the executor
  // down, then stops the watch, which uses the executor): the hosted store server goes last.
  GroupStore store_;
  std::shared_ptr<gloo::Context> context_;
  std::shared_ptr<const PeerDirectory> peers_ = std::make_shared<PeerDirectory>();  // shared with operations
  std::mutex submit_mutex_;     // a tag and its place in the queue are taken together
  std::uint32_t next_tag_ = 0;  // the operation sequence number, also its gloo tag
  std::unique_ptr<GlooExecutor> executor_;
  std::shared_ptr<PeerWatch> watch_;  // null in a world of one; shared with the executor's thread
};

}  // namespace ddprun::detail
