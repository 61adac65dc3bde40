#include "launcher/gpu/gpu_sampler.hpp"

#include <boost/asio/post.hpp>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <utility>

#include "launcher/gpu/nvml_library.hpp"

namespace ddprun::launcher {

namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

}  // namespace

/// The thread's answer to request `serial` (0: to no request, when NVML failed to start first).
struct GpuSampler::Reply {
  std::uint64_t serial = 0;
  std::vector<GpuState> gpus;
  std::optional<std::string> count_error;
  std::optional<std::string> unavailable;
};

/// Held by the sampler and by its thread, so that a thread the sampler left behind (detached in a
/// stuck call) still has everything it touches.
struct GpuSampler::Shared {
  std::mutex mutex;
  std::condition_variable wake;    ///< a job or stop for the thread
  std::condition_variable exited;  ///< the thread is done (after stop, or NVML unavailable)
  /// Replies go here while the sampler exists; null after (the io_context may be gone too).
  boost::asio::io_context* io = nullptr;
  std::function<void(Reply)> on_reply;  ///< checks the sampler's life before touching it
  struct Job {
    std::uint64_t serial = 0;
    std::optional<std::vector<unsigned int>> indices;
  };
  std::optional<Job> job;
  bool busy = true;  ///< starting (load, init) or working on a job: may be inside a driver call
  bool stop = false;
  bool detached = false;  ///< the sampler left without joining: leak NVML, touch nothing else
  bool done = false;
  NvmlCallMarker marker;  ///< the call the thread is inside; read by the loop at a deadline

  /// With `mutex` held.
  void post(Reply reply) {
    if (io == nullptr) return;
    boost::asio::post(*io, [deliver = on_reply, reply = std::move(reply)]() mutable { deliver(std::move(reply)); });
  }

  void run(const GpuSamplerSettings& settings);
};

void GpuSampler::Shared::run(const GpuSamplerSettings& settings) {
  std::unique_ptr<NvmlLibrary> nvml;
  std::optional<std::string> failure;
  marker.enter("dlopen");  // runs the library's constructors: a driver's code, which may block too
  auto loaded = NvmlLibrary::load(settings.library_path);
  marker.leave();
  if (!loaded.ok()) {
    failure = loaded.status.text;
  } else {
    nvml = std::move(*loaded.value);
    nvml->set_call_marker(&marker);
    if (NvmlStatus init = nvml->init(); !init.ok()) {
      failure = "nvmlInit_v2: " + init.text;
      nvml.reset();  // not initialised: no call on the way out
    }
  }

  std::unique_lock lock(mutex);
  busy = false;
  if (failure) {
    post(Reply{job ? job->serial : 0, {}, {}, failure});
    job.reset();
    done = true;  // nothing loaded or initialised is left to shut down
    exited.notify_all();
    return;
  }
  GpuReadMemo memo;  // the GPUs' identities, read once for this NVML session
  for (;;) {
    wake.wait(lock, [&] { return stop || job.has_value(); });
    if (stop) break;
    Job mine = std::move(*job);
    job.reset();
    busy = true;
    lock.unlock();
    Reply reply{mine.serial, {}, {}, {}};
    if (mine.indices) {
      reply.gpus = read_gpus(*nvml, *mine.indices, settings.read, &memo);
    } else if (auto all = read_all_gpus(*nvml, settings.read, &memo); all.ok()) {
      reply.gpus = std::move(*all.value);
    } else {
      reply.count_error = "nvmlDeviceGetCount_v2: " + all.status.text;
    }
    lock.lock();
    busy = false;
    post(std::move(reply));
  }
  if (detached) {
    // The sampler is gone and did not wait: the process may be exiting. No NVML call from here on
    // (nvmlShutdown could block as the call before it did); the library and its state are leaked.
    (void)nvml.release();
    return;
  }
  lock.unlock();
  nvml.reset();  // nvmlShutdown: the sampler waits for it for shutdown_wait at most
  lock.lock();
  done = true;
  exited.notify_all();
}

std::optional<std::string> gpu_sample_problem(const GpuSampleResult& result) {
  if (result.unavailable) return "NVML unavailable: " + *result.unavailable;
  if (result.stalled) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f s", static_cast<double>(result.stalled_for.count()) / 1000.0);
    if (result.stalled_call.empty()) return std::string("NVML stalled: no answer for ") + seconds;
    return "NVML stalled: " + result.stalled_call + " has not returned for " + seconds;
  }
  if (result.count_error) return "NVML cannot count the GPUs: " + *result.count_error;
  if (result.superseded) return std::string("NVML sample superseded by a later request");
  return std::nullopt;
}

GpuSampler::GpuSampler(boost::asio::io_context& io, GpuSamplerSettings settings, Recovered on_recovered)
    : io_(io),
      settings_(std::move(settings)),
      on_recovered_(std::move(on_recovered)),
      shared_(std::make_shared<Shared>()),
      deadline_(io) {
  shared_->io = &io_;
  shared_->on_reply = [this, life = std::weak_ptr<int>(life_)](Reply reply) {
    if (life.expired()) return;  // posted before the sampler went, run after
    on_reply(std::move(reply));
  };
  thread_ = std::thread([shared = shared_, settings = settings_] { shared->run(settings); });
}

GpuSampler::~GpuSampler() {
  life_.reset();
  deadline_.cancel();
  std::unique_lock lock(shared_->mutex);
  shared_->io = nullptr;
  shared_->stop = true;
  shared_->wake.notify_all();
  if (!shared_->busy) {
    // Idle (or never started NVML): it shuts NVML down and exits; nvmlShutdown is a driver call
    // too, so it gets shutdown_wait, not forever.
    if (shared_->exited.wait_for(lock, settings_.shutdown_wait, [&] { return shared_->done; })) {
      lock.unlock();
      thread_.join();
      return;
    }
  }
  // Inside a driver call (or a request, or load and init, or nvmlShutdown past shutdown_wait). A
  // thread stuck in the driver sits in uninterruptible sleep: it cannot be cancelled, and joining
  // it could block the agent (and its exit) for as long as the driver hangs, maybe for good. So it
  // is detached and keeps what it holds (Shared, the NvmlLibrary, the library mapped): when its
  // call returns it sees `detached` and exits without another NVML call, nvmlShutdown included
  // (a call on a driver that just hung could hang again, and at exit nobody waits for it). The
  // kernel releases the driver's files when the process exits. What no code here can shorten: a
  // thread in D state holds up the end of the process itself (exit_group's SIGKILL takes effect
  // when the thread leaves the driver), so the agent's parent may see it exit only then.
  shared_->detached = true;
  lock.unlock();
  thread_.detach();
}

void GpuSampler::sample(std::optional<std::vector<unsigned int>> nvml_indices, Done done) {
  Request request{std::move(nvml_indices), std::move(done), Clock::now()};
  if (unavailable_) {
    GpuSampleResult result;
    result.unavailable = unavailable_;
    answer(request, std::move(result));
  } else if (stalled_) {
    answer(request, stalled_result());
  } else if (busy_) {
    if (waiting_) {
      GpuSampleResult superseded;
      superseded.superseded = true;
      answer(*waiting_, std::move(superseded));
    }
    waiting_ = std::move(request);
  } else {
    dispatch(std::move(request));
  }
}

void GpuSampler::dispatch(Request request) {
  const std::uint64_t serial = ++serial_;
  busy_ = true;
  dispatched_ = Clock::now();
  {
    std::lock_guard lock(shared_->mutex);
    shared_->job = Shared::Job{serial, request.indices};
  }
  shared_->wake.notify_one();
  running_ = std::move(request);
  deadline_.expires_after(answered_once_ ? settings_.deadline : settings_.first_deadline);
  deadline_.async_wait([this, life = std::weak_ptr<int>(life_), serial](const boost::system::error_code& error) {
    if (error || life.expired()) return;
    on_deadline(serial);
  });
}

void GpuSampler::on_deadline(std::uint64_t serial) {
  if (!busy_ || serial != serial_ || !running_) return;  // answered meanwhile
  stalled_ = true;
  const char* call = shared_->marker.call.load(std::memory_order_acquire);
  stall_.call = call != nullptr ? call : "";
  Request late = std::move(*running_);
  running_.reset();
  answer(late, stalled_result());
  if (waiting_) {
    Request next = std::move(*waiting_);
    waiting_.reset();
    answer(next, stalled_result());
  }
}

GpuSampleResult GpuSampler::stalled_result() const {
  GpuSampleResult result;
  result.stalled = true;
  const char* call = shared_->marker.call.load(std::memory_order_acquire);
  if (call != nullptr) {
    result.stalled_call = call;
    const Clock::time_point began{Clock::duration(shared_->marker.since_ns.load(std::memory_order_relaxed))};
    result.stalled_for = since(began);
  } else {
    result.stalled_call = stall_.call;  // between two calls of a request that is still slow
    result.stalled_for = since(dispatched_);
  }
  return result;
}

void GpuSampler::on_reply(Reply reply) {
  if (stalled_) {
    stalled_ = false;
    stall_.stuck_for = since(dispatched_);
    if (on_recovered_) on_recovered_(stall_);
  }
  if (reply.unavailable) {
    unavailable_ = reply.unavailable;
    busy_ = false;
    deadline_.cancel();
    for (auto* pending : {&running_, &waiting_}) {
      if (!*pending) continue;
      GpuSampleResult result;
      result.unavailable = unavailable_;
      Request request = std::move(**pending);
      pending->reset();
      answer(request, std::move(result));
    }
    return;
  }
  if (reply.serial != serial_) return;
  busy_ = false;
  answered_once_ = true;
  deadline_.cancel();
  if (running_) {  // else the deadline answered it: this late sample is dropped
    GpuSampleResult result;
    result.gpus = std::move(reply.gpus);
    result.count_error = std::move(reply.count_error);
    Request request = std::move(*running_);
    running_.reset();
    answer(request, std::move(result));
  }
  if (waiting_) {
    Request next = std::move(*waiting_);
    waiting_.reset();
    dispatch(std::move(next));
  }
}

void GpuSampler::answer(Request& request, GpuSampleResult result) {
  result.took = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - request.asked);
  boost::asio::post(io_, [life = std::weak_ptr<int>(life_), done = std::move(request.done),
                          result = std::move(result)]() mutable {
    if (life.expired()) return;
    done(std::move(result));
  });
}

}  // namespace ddprun::launcher
