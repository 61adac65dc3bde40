#include "gloo_algorithms.hpp"

#include <cstdint>
#include <cstring>
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>
#include <vector>

#include "reduce.hpp"

namespace ddprun::detail {
namespace {

/// Slot prefixes that gloo's own collectives (0x01..0x08) do not use (gloo_peers.cpp has 0x41).
constexpr std::uint8_t kReduceScatterSlotPrefix = 0x40;
constexpr std::uint8_t kExchangeSlotPrefix = 0x42;

bool overlaps(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  auto a_begin = reinterpret_cast<std::uintptr_t>(a);
  auto b_begin = reinterpret_cast<std::uintptr_t>(b);
  return a_begin < b_begin + b_bytes && b_begin < a_begin + a_bytes;
}

}  // namespace

void all_reduce_by_exchange(const GlooCall& call, Buffer buffer, ReduceOp op) {
  auto& context = *call.context;
  const int size = context.size;
  const int rank = context.rank;
  const std::size_t bytes = buffer.bytes();
  const auto slot = gloo::Slot::build(kExchangeSlotPrefix, call.tag);
  // Every rank's buffer, own included, in rank order: each rank reduces them in that same order,
  // so all ranks get bit-identical results.
  std::vector<char> gathered(static_cast<std::size_t>(size) * bytes);
  auto send_buffer = context.createUnboundBuffer(buffer.data, bytes);
  auto receive_buffer = context.createUnboundBuffer(gathered.data(), gathered.size());
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    receive_buffer->recv(peer, slot, static_cast<std::size_t>(peer) * bytes, bytes);
    send_buffer->send(peer, slot);
  }
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    receive_buffer->waitRecv(call.timeout);
  }
  // The result overwrites `buffer`: every send from it must have left first.
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    send_buffer->waitSend(call.timeout);
  }
  std::memcpy(gathered.data() + static_cast<std::size_t>(rank) * bytes, buffer.data, bytes);
  const auto reduce = reduce_function(buffer.type, op);
  reduce(buffer.data, gathered.data(), gathered.data() + bytes, buffer.count);
  for (int next = 2; next < size; ++next) {
    reduce(buffer.data, buffer.data, gathered.data() + static_cast<std::size_t>(next) * bytes, buffer.count);
  }
}

void reduce_scatter_by_ring(const GlooCall& call, Buffer input, Buffer output, ReduceOp op) {
  auto& context = *call.context;
  const int size = context.size;
  const int rank = context.rank;
  const int next = (rank + 1) % size;
  const int previous = (rank + size - 1) % size;
  const std::size_t block = output.bytes();
  const auto slot = gloo::Slot::build(kReduceScatterSlotPrefix, call.tag);
  const auto reduce = reduce_function(output.type, op);
  auto block_of = [&](int index) { return static_cast<std::size_t>((index % size + size) % size) * block; };

  // Block k starts at rank k+1 and travels the ring, each rank adding its own block k, until it
  // reaches rank k after size-1 hops. Step s sends block (rank-s-1) and receives block (rank-s-2):
  // the received partial sum is what the next step sends. Two scratch blocks alternate so that the
  // block being sent is never the one being received into.
  std::vector<char> scratch(2 * block);
  // Receiving straight into `output` on the last step saves a copy, unless output aliases input.
  const bool receive_into_output = !overlaps(output.data, block, input.data, input.bytes());
  auto input_buffer = context.createUnboundBuffer(input.data, input.bytes());  // only sent from
  auto scratch_buffer = context.createUnboundBuffer(scratch.data(), scratch.size());
  auto output_buffer = context.createUnboundBuffer(output.data, block);
  const auto* in = static_cast<const char*>(input.data);

  gloo::transport::UnboundBuffer* send_from = input_buffer.get();
  std::size_t send_offset = block_of(rank - 1);
  for (int step = 0; step < size - 1; ++step) {
    const bool last = step == size - 2;
    gloo::transport::UnboundBuffer* receive_into = scratch_buffer.get();
    std::size_t receive_offset = static_cast<std::size_t>(step % 2) * block;
    if (last && receive_into_output) {
      receive_into = output_buffer.get();
      receive_offset = 0;
    }
    receive_into->recv(previous, slot, receive_offset, block);
    send_from->send(next, slot, send_offset, block);
    receive_into->waitRecv(call.timeout);
    char* partial = static_cast<char*>(receive_into->ptr) + receive_offset;
    reduce(partial, partial, in + block_of(rank - step - 2), output.count);
    send_from->waitSend(call.timeout);
    send_from = receive_into;
    send_offset = receive_offset;
  }
  if (!receive_into_output) {
    std::memcpy(output.data, static_cast<char*>(send_from->ptr) + send_offset, block);
  }
}

}  // namespace ddprun::detail
