#include "nccl_process_group.hpp"

#include <cstdlib>
#include <cstring>

#include "ddprun/error.hpp"
#include "nccl_communicator.hpp"
#include "nccl_work.hpp"
#include "rendezvous/store_error.hpp"
#include "store_adapter.hpp"

namespace ddprun::detail {

namespace {

using nccl::Communicator;
using nccl::Operation;

std::string visible_devices_text() {
  const char* value = std::getenv("CUDA_VISIBLE_DEVICES");
  if (value == nullptr) return "CUDA_VISIBLE_DEVICES is unset";
  return std::string("CUDA_VISIBLE_DEVICES=") + (*value == '\0' ? "\"\"" : value);
}

/// ProcessGroup's public operations have checked counts, types and roots; what is left to check
/// here is where the memory lives.
class NcclProcessGroup final : public ProcessGroup {
 public:
  NcclProcessGroup(GroupStore store, std::shared_ptr<Communicator> communicator)
      : store_(std::move(store)), communicator_(std::move(communicator)) {}

  int rank() const override { return communicator_->rank(); }
  int size() const override { return communicator_->size(); }
  Backend backend() const override { return Backend::nccl; }

 protected:
  std::shared_ptr<Work> start_all_reduce(Buffer buffer, ReduceOp op) override {
    Operation operation{"all_reduce", buffer.count, buffer.type, op, -1};
    check_device_memory(buffer, operation, "buffer");
    return launch(operation, [&](ncclComm_t comm, cudaStream_t stream) {
      return ncclAllReduce(buffer.data, buffer.data, buffer.count, nccl::nccl_type_of(buffer.type), nccl::nccl_op_of(op),
                           comm, stream);
    });
  }

  std::shared_ptr<Work> start_broadcast(Buffer buffer, int root) override {
    Operation operation{"broadcast", buffer.count, buffer.type, std::nullopt, root};
    check_device_memory(buffer, operation, "buffer");
    return launch(operation, [&](ncclComm_t comm, cudaStream_t stream) {
      return ncclBroadcast(buffer.data, buffer.data, buffer.count, nccl::nccl_type_of(buffer.type), root, comm, stream);
    });
  }

  std::shared_ptr<Work> start_all_gather(Buffer input, Buffer output) override {
    Operation operation{"all_gather", input.count, input.type, std::nullopt, -1};
    check_device_memory(input, operation, "input");
    check_device_memory(output, operation, "output");
    return launch(operation, [&](ncclComm_t comm, cudaStream_t stream) {
      return ncclAllGather(input.data, output.data, input.count, nccl::nccl_type_of(input.type), comm, stream);
    });
  }

  std::shared_ptr<Work> start_reduce_scatter(Buffer input, Buffer output, ReduceOp op) override {
    Operation operation{"reduce_scatter", output.count, output.type, op, -1};
    check_device_memory(input, operation, "input");
    check_device_memory(output, operation, "output");
    return launch(operation, [&](ncclComm_t comm, cudaStream_t stream) {
      return ncclReduceScatter(input.data, output.data, output.count, nccl::nccl_type_of(output.type),
                               nccl::nccl_op_of(op), comm, stream);
    });
  }

  /// A one-element all_reduce, as PyTorch's nccl barrier: it ends once every rank has queued it.
  std::shared_ptr<Work> start_barrier() override {
    Operation operation{"barrier", 0, DataType::float32, std::nullopt, -1};
    void* scratch = communicator_->scratch();
    return launch(operation, [&](ncclComm_t comm, cudaStream_t stream) {
      return ncclAllReduce(scratch, scratch, 1, ncclFloat32, ncclSum, comm, stream);
    });
  }

 private:
  template <class Call>
  std::shared_ptr<Work> launch(const Operation& operation, Call&& call) {
    cudaEvent_t event = communicator_->launch(operation, std::forward<Call>(call));
    try {
      return std::make_shared<nccl::NcclWork>(communicator_, event, operation);
    } catch (...) {
      communicator_->release_event(event);
      throw;
    }
  }

  /// NCCL given host memory fails deep inside, or faults the device; say so here instead.
  void check_device_memory(const Buffer& buffer, const Operation& operation, const char* which) const {
    if (buffer.count == 0) return;
    cudaPointerAttributes attributes{};
    cudaError_t result = cudaPointerGetAttributes(&attributes, buffer.data);
    if (result != cudaSuccess) (void)cudaGetLastError();
    bool on_device = result == cudaSuccess &&
                     (attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged);
    if (!on_device) {
      throw Error("nccl " + operation.describe() + ": the " + which +
                  " is not CUDA device memory; the nccl backend works on device buffers (use the gloo backend "
                  "for host memory)");
    }
    if (attributes.type == cudaMemoryTypeDevice && attributes.device != communicator_->device()) {
      throw Error("nccl " + operation.describe() + ": the " + which + " is on cuda:" +
                  std::to_string(attributes.device) + " but this group runs on cuda:" +
                  std::to_string(communicator_->device()));
    }
  }

  GroupStore store_;  // first: outlives the communicator (rank 0 may host the job's store in it)
  std::shared_ptr<Communicator> communicator_;
};

/// Rank 0 makes the id; the others read it under the group's prefix, waiting at most `timeout`.
ncclUniqueId exchange_unique_id(const Identity& identity, const GroupStore& store, std::chrono::milliseconds timeout) {
  ncclUniqueId id{};
  if (identity.rank == 0) {
    nccl::check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    if (store.client) store.client->set(store.prefix + "nccl_unique_id", std::string_view(id.internal, sizeof(id.internal)));
    return id;
  }
  const std::string key = store.prefix + "nccl_unique_id";
  std::string value;
  try {
    value = store.client->get(key, timeout);
  } catch (const rendezvous::StoreTimeout& error) {
    throw TimeoutError("nccl init: rank " + std::to_string(identity.rank) + " waited " + std::to_string(timeout.count()) +
                       " ms for rank 0's NCCL unique id (store key '" + key + "' at " + store.client->address() +
                       "): rank 0 has not created this group (" + error.what() + ")");
  } catch (const rendezvous::StoreError& error) {
    throw Error("nccl init: rank " + std::to_string(identity.rank) + " could not read the NCCL unique id from the store at " +
                store.client->address() + ": " + error.what());
  }
  if (value.size() != sizeof(id.internal)) {
    throw Error("nccl init: store key '" + key + "' holds " + std::to_string(value.size()) + " bytes, not the " +
                std::to_string(sizeof(id.internal)) + " of an NCCL unique id (did another program write it?)");
  }
  std::memcpy(id.internal, value.data(), sizeof(id.internal));
  return id;
}

}  // namespace

bool worker_has_cuda_device() noexcept {
  int count = 0;
  cudaError_t result = cudaGetDeviceCount(&count);
  if (result != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return count > 0;
}

int select_cuda_device(const Identity& identity, const ProcessGroupOptions& options) {
  int count = 0;
  cudaError_t result = cudaGetDeviceCount(&count);
  if (result != cudaSuccess || count <= 0) {
    std::string why = result != cudaSuccess ? std::string("cudaGetDeviceCount: ") + cudaGetErrorName(result) + ": " +
                                                  cudaGetErrorString(result)
                                            : std::string("cudaGetDeviceCount: 0 devices");
    // The runtime says "insufficient driver" also when there is no driver at all.
    if (result == cudaErrorInsufficientDriver) why += " (no NVIDIA driver here, or one too old for this CUDA runtime)";
    (void)cudaGetLastError();
    throw Error("the nccl backend needs a CUDA device; this worker sees none (" + visible_devices_text() + "; " + why +
                "). Run it where a GPU is visible, or use the gloo backend");
  }
  if (options.cuda_device >= 0) {
    if (options.cuda_device >= count) {
      throw Error("ProcessGroupOptions::cuda_device=" + std::to_string(options.cuda_device) + " but this worker sees " +
                  std::to_string(count) + " CUDA device(s) (" + visible_devices_text() + ")");
    }
    return options.cuda_device;
  }
  return identity.local_rank % count;
}

std::unique_ptr<ProcessGroup> make_nccl_process_group(const Identity& identity, const ProcessGroupOptions& options) {
  int device = select_cuda_device(identity, options);
  // A world of one has nobody to share the id with: it needs no store (as the gloo backend).
  GroupStore store = identity.world_size > 1 ? connect_group_store(identity, options.timeout) : GroupStore{};
  ncclUniqueId id = exchange_unique_id(identity, store, options.timeout);
  auto communicator = std::make_shared<Communicator>(device, identity.rank, identity.world_size, id, options.timeout);
  return std::make_unique<NcclProcessGroup>(std::move(store), std::move(communicator));
}

}  // namespace ddprun::detail
