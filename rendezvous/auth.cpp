#include "rendezvous/auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "common/environment.hpp"
#include "common/token_file.hpp"
#include "rendezvous/store_error.hpp"

namespace ddprun::rendezvous::auth {
namespace {

constexpr std::string_view kClientLabel = "ddprun-store-auth-v1 client";
constexpr std::string_view kServerLabel = "ddprun-store-auth-v1 server";

std::string proof(std::string_view label, std::string_view token, std::string_view server_nonce,
                  std::string_view client_nonce) {
  // Plain concatenation is unambiguous because both nonces have a fixed size (kNonceBytes): each
  // side rejects a peer's nonce of any other size before computing a proof.
  std::string message;
  message.reserve(label.size() + server_nonce.size() + client_nonce.size());
  message.append(label).append(server_nonce).append(client_nonce);
  return hmac_sha256(token, message);
}

}  // namespace

std::string hmac_sha256(std::string_view key, std::string_view message) {
  if (key.size() > static_cast<std::size_t>(INT_MAX)) throw StoreError("store token is too long");
  // OpenSSL rejects a null key pointer even with length 0; an empty token still gets a valid MAC.
  static const unsigned char kEmpty = 0;
  const void* key_bytes = key.empty() ? &kEmpty : static_cast<const void*>(key.data());
  const auto* data = message.empty() ? &kEmpty : reinterpret_cast<const unsigned char*>(message.data());
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int out_size = 0;
  if (HMAC(EVP_sha256(), key_bytes, static_cast<int>(key.size()), data, message.size(), out, &out_size) ==
      nullptr) {
    throw StoreError("HMAC-SHA256 failed in OpenSSL");
  }
  return std::string(reinterpret_cast<const char*>(out), out_size);
}

std::string random_nonce() {
  std::string nonce(kNonceBytes, '\0');
  std::size_t filled = 0;
  while (filled < nonce.size()) {
    ssize_t got = ::getrandom(nonce.data() + filled, nonce.size() - filled, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw StoreError(std::string("cannot read random bytes for store authentication (getrandom): ") +
                       std::strerror(errno));
    }
    filled += static_cast<std::size_t>(got);
  }
  return nonce;
}

std::string client_proof(std::string_view token, std::string_view server_nonce, std::string_view client_nonce) {
  return proof(kClientLabel, token, server_nonce, client_nonce);
}

std::string server_proof(std::string_view token, std::string_view server_nonce, std::string_view client_nonce) {
  return proof(kServerLabel, token, server_nonce, client_nonce);
}

bool equal_constant_time(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::optional<std::string> token_from_environment(
    const std::function<std::optional<std::string>(const char*)>& getenv) {
  std::optional<std::string> value = getenv("DDPRUN_STORE_TOKEN");
  std::optional<std::string> path = getenv("DDPRUN_STORE_TOKEN_FILE");
  if (value && path) {
    throw StoreError("both DDPRUN_STORE_TOKEN and DDPRUN_STORE_TOKEN_FILE are set: set only one");
  }
  if (value) {
    if (value->empty()) throw StoreError("DDPRUN_STORE_TOKEN is set but empty");
    return value;
  }
  if (!path) return std::nullopt;
  if (path->empty()) throw StoreError("DDPRUN_STORE_TOKEN_FILE is set but empty");
  common::TokenFile file = common::read_token_file(*path);
  if (!file.error.empty()) {
    throw StoreError("cannot read the store token file " + *path + " (DDPRUN_STORE_TOKEN_FILE): " + file.error);
  }
  if (file.token.empty()) throw StoreError("the store token file " + *path + " (DDPRUN_STORE_TOKEN_FILE) is empty");
  return file.token;
}

std::optional<std::string> process_getenv(const char* name) { return common::getenv_value(name); }

}  // namespace ddprun::rendezvous::auth
