#pragma once
/// ProcessGroup: the ranks of a job joined into a communicator through the job's store, running
/// collectives on the gloo backend (CPU memory) or the nccl backend (CUDA memory). Every operation
/// has a timeout: when a peer dies, the others fail within it with an error naming the operation
/// and, where it can be told, the peer, never a silent hang.
///
///   auto group = ddprun::ProcessGroup::create(ddprun::identity_from_environment());
///   std::vector<float> grads(n);
///   group->all_reduce(ddprun::buffer_of(grads.data(), grads.size()), ddprun::ReduceOp::avg);
#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "ddprun/identity.hpp"
#include "ddprun/types.hpp"

namespace ddprun {

enum class Backend { automatic, gloo, nccl };
std::string_view name_of(Backend backend);  ///< "auto", "gloo", "nccl"

/// DDPRUN_TIMEOUT_S (seconds, a positive number) when set, else 30 minutes (PyTorch's default).
/// Throws ddprun::Error naming the variable when it is malformed.
std::chrono::milliseconds default_timeout();

struct ProcessGroupOptions {
  Backend backend = Backend::automatic;  ///< automatic: nccl when this worker has a GPU, else gloo
  /// Joining the group, and each step of every operation: a peer silent for this long fails it.
  std::chrono::milliseconds timeout = default_timeout();
  int cuda_device = -1;  ///< nccl: the device; -1 = LOCAL_RANK modulo the visible devices
};

/// A collective in flight.
class Work {
 public:
  virtual ~Work() = default;
  /// Blocks until the operation ended, and rethrows its failure: TimeoutError when a peer stayed
  /// silent for the group's timeout, ddprun::Error otherwise. It always returns: the backend bounds
  /// every step of an operation by the group's timeout.
  virtual void wait() = 0;
  /// As wait(), but gives up after `timeout` with TimeoutError; the operation itself goes on (wait
  /// again, or give the group up).
  virtual void wait(std::chrono::milliseconds timeout) = 0;
  /// True once the operation ended, successfully or not.
  virtual bool completed() const = 0;
};

/// Operations run in the order each rank issues them, and every rank must issue the same
/// collectives in the same order with matching buffers (as with torch.distributed). After a failed
/// operation the group is unusable: later operations fail at once, quoting the first failure.
/// Buffers must stay valid and untouched until their operation's Work ended.
class ProcessGroup {
 public:
  /// Joins the job: connects to its store (rank 0 hosts it on MASTER_PORT, for as long as the group
  /// lives, when the launcher has no agent store), then builds the backend's communicator. Blocks
  /// until every rank has joined; throws TimeoutError when one did not within options.timeout, and
  /// ddprun::Error for a backend this build or worker cannot run. Every rank must create its groups
  /// in the same order. A world of one needs no store: its collectives are local.
  static std::unique_ptr<ProcessGroup> create(const Identity& identity, ProcessGroupOptions options = {});
  virtual ~ProcessGroup() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual Backend backend() const = 0;

  /// The asynchronous forms check their arguments here (ddprun::Error when they do not fit the
  /// operation: a wrong output count, mixed types, a root out of range, a null buffer), then queue
  /// the operation and return at once.

  /// In place: every rank ends with the reduction of all ranks' `buffer`.
  std::shared_ptr<Work> all_reduce_async(Buffer buffer, ReduceOp op);
  /// In place: every rank ends with `root`'s `buffer`.
  std::shared_ptr<Work> broadcast_async(Buffer buffer, int root);
  /// `output` (size() * input.count elements) gets every rank's `input`, in rank order. `input` may
  /// be this rank's block of `output` (in place).
  std::shared_ptr<Work> all_gather_async(Buffer input, Buffer output);
  /// `input` holds size() blocks of output.count elements; rank r gets the reduction of block r.
  /// `output` may be this rank's block of `input`.
  std::shared_ptr<Work> reduce_scatter_async(Buffer input, Buffer output, ReduceOp op);
  std::shared_ptr<Work> barrier_async();

  void all_reduce(Buffer buffer, ReduceOp op = ReduceOp::sum) { all_reduce_async(buffer, op)->wait(); }
  void broadcast(Buffer buffer, int root) { broadcast_async(buffer, root)->wait(); }
  void all_gather(Buffer input, Buffer output) { all_gather_async(input, output)->wait(); }
  void reduce_scatter(Buffer input, Buffer output, ReduceOp op = ReduceOp::sum) {
    reduce_scatter_async(input, output, op)->wait();
  }
  void barrier() { barrier_async()->wait(); }

 protected:
  /// What a backend implements: the same operations, their arguments already checked.
  virtual std::shared_ptr<Work> start_all_reduce(Buffer buffer, ReduceOp op) = 0;
  virtual std::shared_ptr<Work> start_broadcast(Buffer buffer, int root) = 0;
  virtual std::shared_ptr<Work> start_all_gather(Buffer input, Buffer output) = 0;
  virtual std::shared_ptr<Work> start_reduce_scatter(Buffer input, Buffer output, ReduceOp op) = 0;
  virtual std::shared_ptr<Work> start_barrier() = 0;
};

}  // namespace ddprun
