#pragma once
/// gloo's rendezvous store over the job's store (ddprun's StoreClient), inside one group's prefix.
///
/// This gloo (Debian's 2022-05-18 snapshot) reads a peer's key without waiting for it first, so
/// get() waits: a rank that starts late is waited for (up to the timeout), not an error.
#include <chrono>
#include <gloo/rendezvous/store.h>
#include <map>
#include <string>
#include <vector>

#include "rendezvous/store_client.hpp"

namespace ddprun::detail {

class GlooStore final : public gloo::rendezvous::Store {
 public:
  /// `client` must outlive this adapter; `timeout` bounds get() and wait() without their own.
  GlooStore(rendezvous::StoreClient& client, std::string prefix, std::chrono::milliseconds timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  /// Waits for the key (the timeout), then reads it. Throws ddprun::TimeoutError naming the key.
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

  /// What this rank published under `key` (empty when nothing): gloo publishes a rank's pair
  /// addresses under its rank number, and errors may quote them later.
  std::vector<char> published(const std::string& key) const;

 private:
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const;
  std::string describe(const std::vector<std::string>& keys) const;
  [[noreturn]] void rethrow(const std::string& what) const;

  rendezvous::StoreClient& client_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
  std::map<std::string, std::vector<char>> published_;
};

}  // namespace ddprun::detail
