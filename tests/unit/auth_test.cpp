#include "rendezvous/auth.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "rendezvous/store_error.hpp"

namespace ddprun::rendezvous::auth {
namespace {

std::string hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char byte : bytes) {
    out += digits[byte >> 4];
    out += digits[byte & 0xf];
  }
  return out;
}

TEST(Hmac, Rfc4231Case1) {
  EXPECT_EQ(hex(hmac_sha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
}

TEST(Hmac, Rfc4231Case2) {
  EXPECT_EQ(hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(Hmac, Rfc4231Case6KeyLongerThanABlock) {
  EXPECT_EQ(hex(hmac_sha256(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(Hmac, EmptyKeyAndMessageStillGiveAMac) { EXPECT_EQ(hmac_sha256("", "").size(), kProofBytes); }

TEST(Proof, BothSidesComputeTheSameProofFromTheSameInputs) {
  std::string server_nonce = random_nonce();
  std::string client_nonce = random_nonce();
  EXPECT_EQ(client_proof("secret", server_nonce, client_nonce), client_proof("secret", server_nonce, client_nonce));
  EXPECT_EQ(server_proof("secret", server_nonce, client_nonce), server_proof("secret", server_nonce, client_nonce));
  EXPECT_EQ(client_proof("secret", server_nonce, client_nonce).size(), kProofBytes);
}

TEST(Proof, ClientAndServerProofsDifferSoOneCannotBeReflectedAsTheOther) {
  std::string server_nonce = random_nonce();
  std::string client_nonce = random_nonce();
  EXPECT_NE(client_proof("secret", server_nonce, client_nonce), server_proof("secret", server_nonce, client_nonce));
}

TEST(Proof, DependsOnTokenAndBothNonces) {
  std::string s = random_nonce();
  std::string c = random_nonce();
  std::string base = client_proof("secret", s, c);
  EXPECT_NE(base, client_proof("secreT", s, c));
  EXPECT_NE(base, client_proof("secret", random_nonce(), c));
  EXPECT_NE(base, client_proof("secret", s, random_nonce()));
  // Swapping the nonces (a server replaying the client's nonce as its own) gives another proof.
  EXPECT_NE(base, client_proof("secret", c, s));
}

TEST(Proof, MatchesTheDocumentedConstruction) {
  std::string s(kNonceBytes, 's');
  std::string c(kNonceBytes, 'c');
  EXPECT_EQ(client_proof("tok", s, c), hmac_sha256("tok", "ddprun-store-auth-v1 client" + s + c));
  EXPECT_EQ(server_proof("tok", s, c), hmac_sha256("tok", "ddprun-store-auth-v1 server" + s + c));
}

TEST(Nonce, HasTheRightSizeAndDiffersEachTime) {
  std::set<std::string> seen;
  for (int i = 0; i < 64; ++i) {
    std::string nonce = random_nonce();
    EXPECT_EQ(nonce.size(), kNonceBytes);
    seen.insert(nonce);
  }
  EXPECT_EQ(seen.size(), 64u);
}

TEST(ConstantTimeCompare, EqualUnequalAndSizeMismatch) {
  EXPECT_TRUE(equal_constant_time("", ""));
  EXPECT_TRUE(equal_constant_time(std::string("a\0b", 3), std::string("a\0b", 3)));
  EXPECT_FALSE(equal_constant_time(std::string("a\0b", 3), std::string("a\0c", 3)));
  EXPECT_FALSE(equal_constant_time("abc", "ab"));
  EXPECT_FALSE(equal_constant_time("", "a"));
  std::string proof = client_proof("t", random_nonce(), random_nonce());
  std::string tampered = proof;
  tampered.back() ^= 1;
  EXPECT_TRUE(equal_constant_time(proof, proof));
  EXPECT_FALSE(equal_constant_time(proof, tampered));
}

/// A fake environment for token_from_environment.
struct FakeEnv {
  std::map<std::string, std::string> vars;
  std::optional<std::string> operator()(const char* name) const {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  }
};

/// A temporary file removed at the end of the test.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& content) {
    char name[] = "/tmp/ddprun_auth_test_XXXXXX";
    int fd = ::mkstemp(name);
    EXPECT_GE(fd, 0);
    ::close(fd);
    path = name;
    std::ofstream(path, std::ios::binary) << content;
  }
  ~TempFile() { std::remove(path.c_str()); }
};

TEST(TokenFromEnvironment, NothingWhenNeitherIsSet) { EXPECT_FALSE(token_from_environment(FakeEnv{})); }

TEST(TokenFromEnvironment, ValueIsUsedAsIs) {
  EXPECT_EQ(token_from_environment(FakeEnv{{{"DDPRUN_STORE_TOKEN", "s3cret\n"}}}), "s3cret\n");
}

TEST(TokenFromEnvironment, FileHasItsTrailingNewlineStripped) {
  TempFile file("s3cret\n");
  EXPECT_EQ(token_from_environment(FakeEnv{{{"DDPRUN_STORE_TOKEN_FILE", file.path}}}), "s3cret");
  TempFile crlf("s3cret\r\n");
  EXPECT_EQ(token_from_environment(FakeEnv{{{"DDPRUN_STORE_TOKEN_FILE", crlf.path}}}), "s3cret");
  TempFile bare("s3cret");
  EXPECT_EQ(token_from_environment(FakeEnv{{{"DDPRUN_STORE_TOKEN_FILE", bare.path}}}), "s3cret");
  TempFile two_lines("s3cret\n\n");  // only one newline is "the end of the line"
  EXPECT_EQ(token_from_environment(FakeEnv{{{"DDPRUN_STORE_TOKEN_FILE", two_lines.path}}}), "s3cret\n");
}

TEST(TokenFromEnvironment, UnreadableFileIsAnErrorNamingThePath) {
  try {
    token_from_environment(FakeEnv{{{"DDPRUN_STORE_TOKEN_FILE", "/nonexistent/ddprun/token"}}});
    FAIL() << "expected StoreError";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/ddprun/token"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos) << e.what();
  }
}

TEST(TokenFromEnvironment, EmptyFileOrValueIsAnError) {
  TempFile empty("\n");
  EXPECT_THROW(token_from_environment(FakeEnv{{{"DDPRUN_STORE_TOKEN_FILE", empty.path}}}), StoreError);
  EXPECT_THROW(token_from_environment(FakeEnv{{{"DDPRUN_STORE_TOKEN", ""}}}), StoreError);
}

TEST(TokenFromEnvironment, BothSetIsAnError) {
  TempFile file("a");
  EXPECT_THROW(token_from_environment(FakeEnv{{{"DDPRUN_STORE_TOKEN", "a"}, {"DDPRUN_STORE_TOKEN_FILE", file.path}}}),
               StoreError);
}

}  // namespace
}  // namespace ddprun::rendezvous::auth
