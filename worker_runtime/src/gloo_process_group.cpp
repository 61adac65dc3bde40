#include "gloo_process_group.hpp"

#include <algorithm>
#include <cstring>
#include <gloo/rendezvous/context.h>

#include "ddprun/error.hpp"
#include "gloo_collectives.hpp"
#include "gloo_device.hpp"
#include "gloo_store.hpp"

namespace ddprun::detail {
namespace {

/// How long an operation may go on after its group's connections were closed under it before the
/// caller is told anyway: past its next wait it can only fail, and one step of an algorithm (a
/// segment's reduction, avg's division) takes milliseconds; one stuck in a wait for I/O never ends
/// (gloo's hole) and is left to gloo's timeout.
constexpr std::chrono::milliseconds kAbortGrace{1000};

/// The peer whose broken connection `failure` reports; -1 for a timeout (a peer that hangs is not
/// lost) or a failure that names none.
int lost_in(std::exception_ptr failure, const PeerDirectory& peers) {
  try {
    std::rethrow_exception(failure);
  } catch (const TimeoutError&) {
    return -1;
  } catch (const std::exception& error) {
    return peers.find_in(error.what()).value_or(-1);
  } catch (...) {
    return -1;
  }
}

std::string describe(Buffer buffer) { return std::string(name_of(buffer.type)) + " x " + std::to_string(buffer.count); }

}  // namespace

GlooProcessGroup::GlooProcessGroup(const Identity& identity, const ProcessGroupOptions& options)
    : rank_(identity.rank), size_(identity.world_size), timeout_(options.timeout) {
  if (size_ > 1) connect(identity);
  // Fail-stop that tells the peers: a rank that gave up closes its connections, so a peer blocked on
  // it (in a ring, possibly not on the dead rank at all) fails at once instead of after the timeout.
  // The notice before the close names the rank whose connection broke, when that was the failure.
  executor_ = std::make_unique<GlooExecutor>([context = context_, watch = watch_, peers = peers_](
                                                 std::exception_ptr failure) {
    if (watch) watch->tell_peers(notice::lost(lost_in(failure, *peers)), std::chrono::milliseconds::zero());
    if (context) context->closeConnections();
  });
  if (watch_) {
    // A connection broke without a notice, or a peer gave up: fail the operation waiting in the
    // caller now, whatever gloo's I/O was doing.
    watch_->start(
        [this](const std::exception& broken) {
          const int lost = peers_->find_in(broken.what()).value_or(-1);
          abort(lost, [&](const std::string& operation) {
            return translate_gloo_failure(FailureContext{operation, rank_, size_, timeout_, peers_.get()}, broken);
          });
        },
        [this](int peer, int lost) {
          abort(lost, [&](const std::string& operation) {
            std::string cause = "rank " + std::to_string(peer) + " gave up after a failure of its own";
            if (lost >= 0 && lost != rank_) {
              auto address = peers_->address_of(lost);
              cause = "rank " + std::to_string(peer) + " lost its connection to rank " + std::to_string(lost) +
                      (address ? " (" + *address + ")" : std::string()) +
                      " and gave up (that peer died, or gave up after a failure of its own)";
            }
            return std::make_exception_ptr(Error(operation + " on rank " + std::to_string(rank_) + " of " +
                                                 std::to_string(size_) + " failed: " + cause));
          });
        });
  }
}

void GlooProcessGroup::abort(int lost, const std::function<std::exception_ptr(const std::string&)>& error_for) {
  // Closing every connection stops gloo's I/O into the caller's buffers and tells the peers (after
  // a notice naming the rank lost, which they quote); the grace lets the operation finish what it
  // does with the buffers on its thread.
  executor_->abort(
      error_for,
      [&] {
        watch_->tell_peers(notice::lost(lost), std::chrono::milliseconds::zero());
        context_->closeConnections();
      },
      kAbortGrace);
}

GlooProcessGroup::~GlooProcessGroup() {
  executor_->shut_down();
  if (watch_) {
    // Peers then take this rank's connections closing as its leaving, not as a failure.
    if (!executor_->failed()) {
      watch_->tell_peers(notice::kLeaving, std::min(timeout_, std::chrono::milliseconds(10000)));
    }
    watch_->stop();
  }
}

void GlooProcessGroup::connect(const Identity& identity) {
  const std::string who = "rank " + std::to_string(rank_) + " of " + std::to_string(size_);
  store_ = connect_group_store(identity, timeout_);
  auto device = create_gloo_device(identity);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank_, size_);
  context->setTimeout(timeout_);
  GlooStore store(*store_.client, store_.prefix, timeout_);
  try {
    context->connectFullMesh(store, device);
  } catch (const TimeoutError& error) {
    throw TimeoutError(who + " could not join the gloo group within " + std::to_string(timeout_.count()) +
                       " ms: " + error.what() + " (has every rank started, with the same world size?)");
  } catch (const std::exception& error) {
    throw Error(who + " could not connect the gloo group: " + error.what());
  }
  context_ = std::move(context);
  // Before the exchange: each peer's watch receive then reaches this rank before its record does.
  watch_ = std::make_shared<PeerWatch>(context_);
  // Learning who is at the other end of each connection also proves every peer is connected, so
  // none needs the store any more: a rank that hosts it may take it down afterwards.
  const std::uint32_t tag = next_tag_++;
  try {
    peers_ = std::make_shared<const PeerDirectory>(
        exchange_connection_ends(context_, store.published(std::to_string(rank_)), tag, timeout_));
  } catch (const std::exception& error) {
    FailureContext failure{"exchanging connection ends (the last step of joining the group)", rank_, size_, timeout_,
                           peers_.get()};
    std::rethrow_exception(translate_gloo_failure(failure, error));
  }
}

template <class Body>
std::shared_ptr<Work> GlooProcessGroup::submit(std::string_view name, const std::string& details, Body body) {
  // Ranks match operations by tag, so tags must follow the queue's order even when several threads
  // submit (which order they win is theirs to agree on, as with torch.distributed).
  std::lock_guard lock(submit_mutex_);
  const std::uint32_t tag = next_tag_++;
  std::string operation = std::string(name) + " #" + std::to_string(tag);
  if (!details.empty()) operation += " (" + details + ")";
  FailureContext failure{operation, rank_, size_, timeout_, peers_.get()};
  // The task owns what it uses (no `this`): after an abort it may end after the group is gone.
  return executor_->submit(std::move(operation), [context = context_, peers = peers_, tag, timeout = timeout_,
                                                  failure, body = std::move(body)] {
    static_cast<void>(peers);  // kept alive for `failure`, which points into it
    try {
      body(GlooCall{context, tag, timeout});
    } catch (const std::exception& error) {
      std::rethrow_exception(translate_gloo_failure(failure, error));
    }
  });
}

std::shared_ptr<Work> GlooProcessGroup::start_all_reduce(Buffer buffer, ReduceOp op) {
  return submit("all_reduce", describe(buffer) + ", " + std::string(name_of(op)),
                [=, size = size_](const GlooCall& call) {
                  if (size == 1 || buffer.count == 0) return;  // avg over one rank divides by one
                  gloo_all_reduce(call, buffer, op);
                });
}

std::shared_ptr<Work> GlooProcessGroup::start_broadcast(Buffer buffer, int root) {
  return submit("broadcast", describe(buffer) + ", root " + std::to_string(root),
                [=, size = size_](const GlooCall& call) {
                  if (size == 1 || buffer.count == 0) return;
                  gloo_broadcast(call, buffer, root);
                });
}

std::shared_ptr<Work> GlooProcessGroup::start_all_gather(Buffer input, Buffer output) {
  return submit("all_gather", describe(input) + " per rank", [=, size = size_](const GlooCall& call) {
    if (input.count == 0) return;
    if (size == 1) {
      if (input.data != output.data) std::memmove(output.data, input.data, input.bytes());
      return;
    }
    gloo_all_gather(call, input, output);
  });
}

std::shared_ptr<Work> GlooProcessGroup::start_reduce_scatter(Buffer input, Buffer output, ReduceOp op) {
  return submit("reduce_scatter", describe(output) + " per rank, " + std::string(name_of(op)),
                [=, size = size_](const GlooCall& call) {
                  if (output.count == 0) return;
                  if (size == 1) {
                    if (input.data != output.data) std::memmove(output.data, input.data, output.bytes());
                    return;
                  }
                  gloo_reduce_scatter(call, input, output, op);
                });
}

std::shared_ptr<Work> GlooProcessGroup::start_barrier() {
  return submit("barrier", "", [size = size_](const GlooCall& call) {
    if (size == 1) return;
    gloo_barrier(call);
  });
}

}  // namespace ddprun::detail
