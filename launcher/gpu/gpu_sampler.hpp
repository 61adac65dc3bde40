#pragma once
/// GpuSampler: the one thread that owns NVML (nvml_library.hpp) and makes every NVML call of the
/// agent, so that a driver call that stalls (D state, 45 s GSP timeouts: nvml_library.hpp) never
/// blocks the agent's event loop. The loop asks for a sample of some GPUs; the answer comes back
/// as a handler posted on the loop: the GPUs' states, or why there are none.
///
/// - At most one request runs on the thread; one more may wait, and a request made while one
///   waits replaces it (latest wins): the replaced one is answered at once as superseded. Every
///   request's `done` runs exactly once, on the loop, never inside sample().
/// - Each request has a deadline. When the thread has not answered by then, `done` gets a result
///   marked stalled (which NVML call, for how long) and the sampler is stalled(): until the thread
///   comes back, every request is answered at once as stalled and no call is added on the stuck
///   driver. When the thread comes back, the late result is dropped and on_recovered says so once.
/// - NVML is loaded and initialised on the thread (init can take seconds). When either fails,
///   every request is answered as unavailable with one reason (the caller prints it once).
/// - The destructor never blocks on the driver: an idle thread shuts NVML down and is joined
///   within shutdown_wait; a thread inside a call is detached and left with its NVML (see the .cpp).
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "launcher/gpu/gpu_reader.hpp"
#include "launcher/gpu/gpu_state.hpp"

namespace ddprun::launcher {

/// One request's answer. At most one of stalled, unavailable, count_error, superseded; none of
/// them: `gpus` holds the sample.
struct GpuSampleResult {
  std::vector<GpuState> gpus;  ///< read_gpus' states, in the order asked
  /// The thread missed the deadline (now, or for an earlier request it has not come back from).
  bool stalled = false;
  std::string stalled_call;  ///< the NVML call it is inside ("nvmlDeviceGetUtilizationRates"); may be empty
  std::chrono::milliseconds stalled_for{0};  ///< how long that call (or the request) has run
  /// NVML could not be loaded or initialised: the reason ("LIBRARY_NOT_FOUND: ...").
  std::optional<std::string> unavailable;
  /// NVML could not count the GPUs for a sample of every GPU (read_all_gpus): its status line.
  std::optional<std::string> count_error;
  bool superseded = false;  ///< replaced by a later request before it ran: ask again if it still matters
  std::chrono::microseconds took{0};  ///< from the request to this answer
};

/// The line the loop shows for a result that holds no sample, or nothing when it holds one:
/// "NVML stalled: nvmlDeviceGetUtilizationRates has not returned for 2.0 s",
/// "NVML unavailable: LIBRARY_NOT_FOUND: ...", "NVML sample superseded by a later request".
std::optional<std::string> gpu_sample_problem(const GpuSampleResult& result);

/// The thread came back from a stalled call: which one, and how long it was stuck in all.
struct GpuSamplerRecovery {
  std::string call;
  std::chrono::milliseconds stuck_for{0};
};

struct GpuSamplerSettings {
  std::string library_path = "libnvidia-ml.so.1";  ///< nvml_library_path(DDPRUN_NVML_LIBRARY)
  std::chrono::milliseconds deadline{2000};        ///< a sample's, once NVML has answered once
  /// The deadline of requests made before the first answer: load, nvmlInit_v2 and the first handle
  /// of each GPU, which initialises it (1-3 s per GPU without persistence mode).
  std::chrono::milliseconds first_deadline{30000};
  /// How long the destructor waits for an idle thread's nvmlShutdown before leaving it.
  std::chrono::milliseconds shutdown_wait{200};
  GpuReadOptions read;
};

class GpuSampler {
 public:
  using Done = std::function<void(GpuSampleResult)>;
  using Recovered = std::function<void(const GpuSamplerRecovery&)>;

  /// Starts the thread, which loads and initialises NVML at once. Destroy the sampler before `io`.
  GpuSampler(boost::asio::io_context& io, GpuSamplerSettings settings, Recovered on_recovered = {});
  ~GpuSampler();
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  /// A sample of these NVML indices (nothing: every GPU NVML counts); `done` is posted on the loop.
  void sample(std::optional<std::vector<unsigned int>> nvml_indices, Done done);

  /// A request missed its deadline and the thread has not come back yet.
  bool stalled() const { return stalled_; }
  /// NVML's load or init failed: the reason (every answer carries it too).
  const std::optional<std::string>& unavailable() const { return unavailable_; }

 private:
  struct Shared;  // what the thread and the loop both hold (gpu_sampler.cpp)
  struct Request {
    std::optional<std::vector<unsigned int>> indices;
    Done done;
    std::chrono::steady_clock::time_point asked;
  };
  struct Reply;  // the thread's answer to one request

  void dispatch(Request request);
  void on_reply(Reply reply);
  void on_deadline(std::uint64_t serial);
  GpuSampleResult stalled_result() const;
  void answer(Request& request, GpuSampleResult result);

  boost::asio::io_context& io_;
  GpuSamplerSettings settings_;
  Recovered on_recovered_;
  std::shared_ptr<Shared> shared_;
  std::thread thread_;
  boost::asio::steady_timer deadline_;
  std::optional<Request> running_;  ///< handed to the thread, not answered yet
  std::optional<Request> waiting_;  ///< the next one (latest wins)
  std::uint64_t serial_ = 0;        ///< of the request handed to the thread last
  bool busy_ = false;               ///< the thread works on serial_ (answered by the deadline or not)
  std::chrono::steady_clock::time_point dispatched_;  ///< when serial_ went to the thread
  GpuSamplerRecovery stall_;        ///< the stuck call, when stalled_
  bool answered_once_ = false;
  bool stalled_ = false;
  std::optional<std::string> unavailable_;
  std::shared_ptr<int> life_ = std::make_shared<int>(0);  ///< handlers hold it weakly
};

}  // namespace ddprun::launcher
