#include "store_connection.hpp"

#include <boost/asio/write.hpp>

#include "auth.hpp"

namespace asio = boost::asio;

namespace ddprun::rendezvous {
namespace {

/// Most reads are a few hundred bytes; a large value arrives in steps of at most this.
constexpr std::size_t kMaxReadStep = 1 << 20;
/// Past this much unwritten output, the connection is not read until its client catches up.
constexpr std::size_t kMaxPendingOutput = 16 << 20;
/// An idle connection keeps no buffer larger than this (the memory-per-connection goal).
constexpr std::size_t kIdleBufferCapacity = 4096;

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

void StoreConnection::on_readable() {
  boost::system::error_code ec;
  std::size_t available = socket_.available(ec);
  if (ec) return close();
  std::size_t step = std::min(std::max<std::size_t>(available, 1), kMaxReadStep);
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
    wire::Decoded decoded = wire::decode_request(*dialect_, rest, shared_.limits);
    if (decoded.status == wire::DecodeStatus::need_more) break;
    if (decoded.status == wire::DecodeStatus::invalid) return close();
    offset += decoded.consumed;
    if (!handle(decoded.request)) return close();
  }
  if (closed_) return;
  input_.erase(input_.begin(), input_.begin() + static_cast<std::ptrdiff_t>(offset));
  if (input_.empty() && input_.capacity() > kIdleBufferCapacity) input_ = {};
  flush();
  if (output_.size() + writing_.size() > kMaxPendingOutput) {
    read_paused_ = true;  // resumed when the writes drain
    return;
  }
  wait_readable();
}

bool StoreConnection::handle(const wire::Request& request) {
  if (request.op == wire::Op::validate) return request.number == wire::kValidationMagic;
  if (auth_ != Auth::not_required && auth_ != Auth::done) return handle_auth(request);
  if (request.op == wire::Op::auth_challenge || request.op == wire::Op::auth_response) {
    return false;  // this store has no token: a client that insists on one is misconfigured
  }
  KeySpace::Outcome outcome = shared_.keys.execute(id_, request);
  if (!outcome.error.empty()) return false;
  for (auto& delivery : outcome.deliveries) {
    if (delivery.session == id_) {
      output_ += delivery.bytes;  // e.g. its own earlier WAIT, completed by this request
    } else if (auto it = shared_.sessions.find(delivery.session); it != shared_.sessions.end()) {
      if (auto other = it->second.lock()) other->deliver(delivery.bytes);
    }
  }
  output_ += outcome.reply;
  return true;
}

bool StoreConnection::handle_auth(const wire::Request& request) {
  switch (request.op) {
    case wire::Op::ping:  // part of the handshake; proves nothing and reveals nothing
      wire::put_u32(output_, request.number);
      return true;
    case wire::Op::auth_challenge:
      server_nonce_ = auth::random_nonce();
      wire::put_bytes(output_, server_nonce_);
      auth_ = Auth::challenged;
      return true;
    case wire::Op::auth_response: {
      if (auth_ != Auth::challenged || request.values.size() != 2) return false;
      const std::string& proof = request.values[0];
      const std::string& client_nonce = request.values[1];
      if (client_nonce.size() != auth::kNonceBytes) return false;
      if (!auth::equal_constant_time(proof, auth::client_proof(*shared_.token, server_nonce_, client_nonce))) {
        return false;
      }
      auth_ = Auth::done;
      wire::put_u8(output_, 1);
      wire::put_bytes(output_, auth::server_proof(*shared_.token, server_nonce_, client_nonce));
      return true;
    }
    default:
      return false;  // anything else before authenticating closes the connection
  }
}

void StoreConnection::deliver(std::string_view bytes) {
  if (closed_) return;
  output_ += bytes;
  flush();
}

void StoreConnection::flush() {
  if (write_in_flight_ || output_.empty() || closed_) return;
  writing_.swap(output_);
  output_.clear();
  write_in_flight_ = true;
  asio::async_write(socket_, asio::buffer(writing_),
                    [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
                      self->write_in_flight_ = false;
                      if (ec) return self->close();
                      self->writing_.clear();
                      if (self->writing_.capacity() > kIdleBufferCapacity) self->writing_ = {};
                      self->flush();
                      if (self->read_paused_ && self->output_.size() + self->writing_.size() <= kMaxPendingOutput) {
                        self->read_paused_ = false;
                        self->process_input();  // requests already buffered, then reads resume
                      }
                    });
}

void StoreConnection::close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  shared_.keys.forget(id_);
  shared_.sessions.erase(id_);
  if (shared_.sessions.empty() && shared_.on_idle) {
    auto on_idle = std::move(shared_.on_idle);
    shared_.on_idle = nullptr;
    on_idle();
  }
}

}  // namespace ddprun::rendezvous
