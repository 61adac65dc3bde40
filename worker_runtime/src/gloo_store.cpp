#include "gloo_store.hpp"

#include "ddprun/error.hpp"
#include "rendezvous/store_error.hpp"

namespace ddprun::detail {

GlooStore::GlooStore(rendezvous::StoreClient& client, std::string prefix, std::chrono::milliseconds timeout)
    : client_(client), prefix_(std::move(prefix)), timeout_(timeout) {}

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  published_[key] = data;
  try {
    client_.set(prefix_ + key, std::string_view(data.data(), data.size()));
  } catch (const rendezvous::StoreError&) {
    rethrow("publishing key \"" + prefix_ + key + "\"");
  }
}

std::vector<char> GlooStore::get(const std::string& key) {
  std::string value;
  try {
    value = client_.get(prefix_ + key, timeout_);
  } catch (const rendezvous::StoreError&) {
    rethrow("waiting for " + describe({key}));
  }
  return std::vector<char>(value.begin(), value.end());
}

void GlooStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void GlooStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  try {
    client_.wait(prefixed(keys), timeout);
  } catch (const rendezvous::StoreError&) {
    rethrow("waiting for " + describe(keys));
  }
}

std::string GlooStore::describe(const std::vector<std::string>& keys) const {
  // gloo's full mesh publishes each rank's addresses under the rank's number.
  if (keys.size() == 1 && !keys[0].empty() && keys[0].find_first_not_of("0123456789") == std::string::npos) {
    return "rank " + keys[0] + " to publish its address (key \"" + prefix_ + keys[0] + "\")";
  }
  std::string text = std::to_string(keys.size()) + " key(s):";
  for (const auto& key : keys) text += " \"" + prefix_ + key + "\"";
  return text;
}

std::vector<char> GlooStore::published(const std::string& key) const {
  auto found = published_.find(key);
  return found == published_.end() ? std::vector<char>{} : found->second;
}

std::vector<std::string> GlooStore::prefixed(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& key : keys) out.push_back(prefix_ + key);
  return out;
}

void GlooStore::rethrow(const std::string& what) const {
  // Called from a catch block: the store's own message already names the address and the timeout.
  try {
    throw;
  } catch (const rendezvous::StoreTimeout& error) {
    throw TimeoutError(what + " in the job's store: " + error.what());
  } catch (const rendezvous::StoreError& error) {
    throw Error(what + " in the job's store: " + error.what());
  }
}

}  // namespace ddprun::detail
