#pragma once
/// The nccl backend of ProcessGroup: collectives on CUDA memory over one NCCL communicator per group.
///
/// Built only where CUDA and NCCL were found (the build defines DDPRUN_HAVE_NCCL=1 and compiles
/// src/nccl_*.cpp), so callers guard their calls with `#if DDPRUN_HAVE_NCCL`. This header names no
/// CUDA or NCCL type: process_group.cpp needs neither header.
///
/// Contract of the group it makes:
/// - one CUDA device per rank: ProcessGroupOptions::cuda_device, else LOCAL_RANK modulo the visible
///   devices. Creating the group makes it the calling thread's current device (so the worker's later
///   cudaMalloc lands there); every operation runs with it current and restores the caller's;
/// - its own CUDA stream, a blocking one: ordered after what the worker queued on the legacy default
///   stream, so a buffer just filled by cudaMemcpy or a kernel on stream 0 is safe to pass;
/// - buffers are device (or managed) memory of the group's device; host memory is an Error that says
///   to use the gloo backend;
/// - an operation returns its Work once NCCL queued it. Work::wait() polls the completion event and
///   the communicator's asynchronous error; when the operation fails, or has not ended within the
///   group's timeout after it was queued, it aborts the communicator (ncclCommAbort) and throws
///   Error / TimeoutError naming the operation; every later operation then fails at once, quoting
///   the first failure. wait(timeout) gives up earlier without aborting (the operation goes on);
/// - operations must be issued from one thread at a time (as NCCL's communicators require); waits
///   may come from any thread.
#include <memory>

#include "ddprun/identity.hpp"
#include "ddprun/process_group.hpp"

namespace ddprun::detail {

/// True when the CUDA runtime sees at least one device. Never throws: no driver, no device, or an
/// empty CUDA_VISIBLE_DEVICES all give false. Backend::automatic picks nccl only when this is true.
bool worker_has_cuda_device() noexcept;

/// The device this worker's nccl group uses: options.cuda_device when >= 0 (checked against the
/// visible count), else identity.local_rank modulo the visible devices. Throws ddprun::Error
/// "the nccl backend needs a CUDA device; this worker sees none (CUDA_VISIBLE_DEVICES=...)" when there
/// is none. Touches no store.
int select_cuda_device(const Identity& identity, const ProcessGroupOptions& options);

/// Joins the job's nccl group, as GlooProcessGroup's constructor does for gloo: checks for a device
/// first (select_cuda_device: a worker without one fails at once, before joining anything), then
/// connects to the job's store (connect_group_store; none for a world of one), where rank 0 sets
/// the NCCL unique id under the group's prefix and the others get it, then initializes the
/// communicator non-blocking, so that a rank that never joins gives a TimeoutError after
/// options.timeout instead of a hang. The group keeps the store (and the server rank 0 may host)
/// as long as it lives.
std::unique_ptr<ProcessGroup> make_nccl_process_group(const Identity& identity, const ProcessGroupOptions& options);

}  // namespace ddprun::detail
