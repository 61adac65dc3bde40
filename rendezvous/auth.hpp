#pragma once
/// Store authentication: a challenge-response over HMAC-SHA256 so that a store can require a shared
/// token without the token ever crossing the wire, and the client learns that the server knows it too
/// (mutual). The exchange, after VALIDATE and PING on the current dialect:
///   client: AUTH_CHALLENGE                      server: bytes server_nonce
///   client: AUTH_RESPONSE {client_proof, client_nonce}
///   server: u8 1, bytes server_proof            (or, on a wrong proof, it closes the connection)
/// Both proofs bind both nonces, so a recorded exchange cannot be replayed against a fresh nonce, and
/// distinct labels keep a server's proof from being reflected back as a client's.
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace ddprun::rendezvous::auth {

inline constexpr std::size_t kNonceBytes = 32;
inline constexpr std::size_t kProofBytes = 32;  ///< SHA-256 output

/// kNonceBytes from the OS CSPRNG (getrandom). Throws StoreError when it is unavailable.
std::string random_nonce();

/// The proof a client sends: HMAC(token, "ddprun-store-auth-v1 client" || server_nonce || client_nonce).
/// Both nonces must be kNonceBytes (the concatenation relies on it): check a peer's nonce first.
std::string client_proof(std::string_view token, std::string_view server_nonce, std::string_view client_nonce);

/// The proof a server answers with: HMAC(token, "ddprun-store-auth-v1 server" || server_nonce || client_nonce).
std::string server_proof(std::string_view token, std::string_view server_nonce, std::string_view client_nonce);

/// Compares in time independent of where the bytes differ (CRYPTO_memcmp); false when sizes differ
/// (the size of a proof is public).
bool equal_constant_time(std::string_view a, std::string_view b);

/// The token from the environment: DDPRUN_STORE_TOKEN (the value) or DDPRUN_STORE_TOKEN_FILE (a path;
/// one trailing newline stripped); nothing when neither is set. Throws StoreError when both are set,
/// when the value is empty, or when the file is unreadable or empty: a user who meant to turn
/// authentication on must not silently get a store without it. `getenv` returns a variable's value
/// (or nothing), so tests need not touch the process environment.
std::optional<std::string> token_from_environment(
    const std::function<std::optional<std::string>(const char*)>& getenv);

/// The process environment, for token_from_environment.
std::optional<std::string> process_getenv(const char* name);

/// HMAC-SHA256(key, message), 32 raw bytes. Exposed for the known-answer tests.
std::string hmac_sha256(std::string_view key, std::string_view message);

}  // namespace ddprun::rendezvous::auth
