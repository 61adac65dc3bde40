#include "rendezvous/store_connection.hpp"

#include <algorithm>
#include <boost/asio/write.hpp>

#include "rendezvous/auth.hpp"

namespace asio = boost::asio;

namespace ddprun::rendezvous {
namespace {

/// An idle connection keeps no buffer larger than this (the memory-per-connection goal).
constexpr std::size_t kIdleBufferCapacity = 4096;
constexpr std::size_t kIdleBufferListCapacity = 4;

}  // namespace

StoreConnection::StoreConnection(asio::ip::tcp::socket socket, SessionId id, ServerShared& shared)
    : socket_(std::move(socket)), id_(id), shared_(shared), auth_(shared.token ? Auth::required : Auth::not_required) {}

void StoreConnection::start() {
  boost::system::error_code ignored;
  socket_.set_option(asio::ip::tcp::no_delay(true), ignored);
  socket_.non_blocking(true, ignored);
  wait_readable();
}

// Waiting for readability instead of reading into a buffer keeps an idle connection down to this
// object: no read buffer exists until bytes arrive. A connection that never sends is never timed out.
void StoreConnection::wait_readable() {
  socket_.async_wait(asio::ip::tcp::socket::wait_read,
                     [self = shared_from_this()](const boost::system::error_code& ec) {
                       if (ec || self->closed_) return self->close();
                       self->on_readable();
                     });
}

const ConnectionBudget& StoreConnection::budget() const {
  return auth_ == Auth::required || auth_ == Auth::challenged ? shared_.unauthenticated : shared_.open;
}

void StoreConnection::on_readable() {
  boost::system::error_code ec;
  std::size_t available = socket_.available(ec);
  if (ec) return close();
  const std::size_t max_input = budget().max_input_bytes;
  // Never 0 here: what stays buffered is part of one request (shorter than max_request_bytes),
  // or requests waiting for their replies to fit, and then the connection is not being read.
  const std::size_t room = max_input - std::min(input_.size(), max_input);
  if (room == 0) return close();
  std::size_t step = std::min({std::max<std::size_t>(available, 1), kReadStepBytes, room});
  if (awaited_input_ > input_.size() + kIdleBufferCapacity) {
    // A large field arriving: the buffer grows to hold it at once (a single large value is
    // allocated once at its size, not doubled and copied as it arrives), and is read up to its end.
    input_.reserve(std::min(std::max(awaited_input_, 2 * input_.capacity()), max_input));
    step = std::min(step, awaited_input_ - input_.size());
  }
  std::size_t old_size = input_.size();
  input_.resize(old_size + step);
  std::size_t n = socket_.read_some(asio::buffer(input_.data() + old_size, step), ec);
  input_.resize(old_size + n);
  if (ec == asio::error::would_block) return wait_readable();
  if (ec) return close();  // EOF or reset: the client is gone
  process_input();
}

void StoreConnection::process_input() {
  std::size_t offset = 0;
  while (!closed_) {
    std::span<const std::uint8_t> rest(input_.data() + offset, input_.size() - offset);
    if (!dialect_) {
      dialect_ = wire::detect_dialect(rest);
      if (!dialect_) break;
    }
    const ConnectionBudget& budget = this->budget();
    wire::Decoded decoded = wire::decode_request(*dialect_, rest, budget.limits);
    if (decoded.status == wire::DecodeStatus::need_more) {
      awaited_input_ = decoded.need_at_least;  // counted from `rest`, the front of input_ once erased
      break;
    }
    awaited_input_ = 0;
    if (decoded.status == wire::DecodeStatus::invalid) return close();
    // Before the request runs, so that no reply is built that the budget has not admitted.
    Admission admission = admit(unsent(), reply_bytes(shared_.keys, decoded.request), budget.max_unsent_bytes);
    if (admission == Admission::never) return close();
    if (admission == Admission::wait) {
      read_paused_ = true;  // the request stays buffered; the write handler tries it again
      break;
    }
    offset += decoded.consumed;
    if (!handle(decoded.request)) return close();
  }
  if (closed_) return;
  input_.erase(input_.begin(), input_.begin() + static_cast<std::ptrdiff_t>(offset));
  if (input_.empty() && input_.capacity() > kIdleBufferCapacity) input_ = {};
  flush();
  if (!read_paused_) wait_readable();
}

bool StoreConnection::handle(const wire::Request& request) {
  if (request.op == wire::Op::validate) {
    // The current dialect opens with it; a second one is a confused or hostile peer.
    if (validated_) return false;
    validated_ = true;
    return request.number == wire::kValidationMagic;
  }
  if (auth_ != Auth::not_required && auth_ != Auth::done) return handle_auth(request);
  if (request.op == wire::Op::auth_challenge || request.op == wire::Op::auth_response) {
    return false;  // this store has no token: a client that insists on one is misconfigured
  }
  KeySpace::Outcome outcome = shared_.keys.execute(id_, request);
  if (!outcome.error.empty()) return false;
  for (const auto& delivery : outcome.deliveries) {
    if (delivery.session == id_) {
      deliver(delivery.bytes);  // e.g. its own earlier WAIT, completed by this request
    } else if (auto it = shared_.sessions.find(delivery.session); it != shared_.sessions.end()) {
      if (auto other = it->second.lock()) other->deliver(delivery.bytes);
    }
  }
  if (closed_) return false;  // a push to itself did not fit
  output_.push(std::move(outcome.reply));
  return true;
}

bool StoreConnection::handle_auth(const wire::Request& request) {
  switch (request.op) {
    case wire::Op::ping: {  // part of the handshake; proves nothing and reveals nothing
      std::string reply;
      wire::put_u32(reply, request.number);
      output_.push(std::move(reply));
      return true;
    }
    case wire::Op::auth_challenge: {
      server_nonce_ = auth::random_nonce();
      std::string reply;
      wire::put_bytes(reply, server_nonce_);
      output_.push(std::move(reply));
      auth_ = Auth::challenged;
      return true;
    }
    case wire::Op::auth_response: {
      if (auth_ != Auth::challenged || request.values.size() != 2) return false;
      const std::string& proof = request.values[0];
      const std::string& client_nonce = request.values[1];
      if (client_nonce.size() != auth::kNonceBytes) return false;
      if (!auth::equal_constant_time(proof, auth::client_proof(*shared_.token, server_nonce_, client_nonce))) {
        return false;
      }
      auth_ = Auth::done;
      std::string reply;
      wire::put_u8(reply, 1);
      wire::put_bytes(reply, auth::server_proof(*shared_.token, server_nonce_, client_nonce));
      output_.push(std::move(reply));
      return true;
    }
    default:
      return false;  // anything else before authenticating closes the connection
  }
}

void StoreConnection::deliver(std::shared_ptr<const std::string> bytes) {
  if (closed_) return;
  // Its requests wait for room; pushes cannot wait, and a client this far behind is not reading.
  if (admit(unsent(), bytes->size(), budget().max_unsent_bytes) != Admission::run) return close();
  output_.push(std::move(bytes));
  flush();
}

void StoreConnection::flush() {
  if (write_in_flight_ || output_.empty() || closed_) return;
  writing_.swap(output_);
  write_buffers_.clear();
  writing_.for_each_chunk([this](std::string_view chunk) { write_buffers_.emplace_back(chunk.data(), chunk.size()); });
  write_in_flight_ = true;
  asio::async_write(socket_, write_buffers_,
                    [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
                      self->write_in_flight_ = false;
                      if (ec) return self->close();
                      self->writing_.clear();
                      if (self->write_buffers_.capacity() > kIdleBufferListCapacity) self->write_buffers_ = {};
                      self->flush();
                      if (self->read_paused_) {
                        self->read_paused_ = false;
                        self->process_input();  // the waiting request again: it runs, or waits for the next write
                      }
                    });
}

void StoreConnection::close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  input_ = {};
  output_.clear();  // writing_ may still be in the hands of the write in flight
  shared_.keys.forget(id_);
  shared_.sessions.erase(id_);
  if (shared_.sessions.empty() && shared_.on_idle) {
    auto on_idle = std::move(shared_.on_idle);
    shared_.on_idle = nullptr;
    on_idle();
  }
}

}  // namespace ddprun::rendezvous
