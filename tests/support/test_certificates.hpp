#pragma once
/// TestCertificates: a throwaway certificate authority, a server certificate for the names a test's
/// etcd answers at, a client certificate that CA signed, and a stranger's client certificate signed
/// by another CA (and the client key encrypted with a passphrase): PEM files in a folder of the test's own, made with OpenSSL's library (no openssl
/// command needed), valid from an hour ago for a day. Keys are P-256 (fast to make, and Go's TLS
/// and OpenSSL both take them).
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace ddprun::testing {

class TestCertificates {
 public:
  /// `server_names`: what clients connect to, each an IP address or a DNS name ("127.0.0.1", "localhost").
  explicit TestCertificates(const std::vector<std::string>& server_names)
      : dir_(std::filesystem::temp_directory_path() / ("ddprun-tls-" + std::to_string(::getpid()) + "-" +
                                                       std::to_string(next_id()))) {
    std::filesystem::create_directories(dir_);
    Authority ca = make_authority("ddprun test CA");
    Authority other = make_authority("someone else's CA");
    write(ca.cert.get(), ca.key.get(), "ca");
    std::string names;
    for (const auto& name : server_names) {
      if (!names.empty()) names += ",";
      names += (looks_like_ip(name) ? "IP:" : "DNS:") + name;
    }
    Key server_key = make_key();
    write(sign(&ca, server_key.get(), "etcd", false, names, "serverAuth,clientAuth").get(), server_key.get(), "server");
    Key client_key = make_key();
    write(sign(&ca, client_key.get(), "ddprun agent", false, "", "clientAuth").get(), client_key.get(), "client");
    std::FILE* encrypted = std::fopen(file("client-encrypted.key").c_str(), "w");
    check(encrypted != nullptr && PEM_write_PKCS8PrivateKey(encrypted, client_key.get(), EVP_aes_128_cbc(), "secret", 6,
                                                            nullptr, nullptr) == 1,
          "writing an encrypted key");
    std::fclose(encrypted);
    Key stranger_key = make_key();
    write(sign(&other, stranger_key.get(), "stranger", false, "", "clientAuth").get(), stranger_key.get(), "stranger");
    write(other.cert.get(), other.key.get(), "other-ca");
  }
  ~TestCertificates() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  TestCertificates(const TestCertificates&) = delete;
  TestCertificates& operator=(const TestCertificates&) = delete;

  std::string ca() const { return file("ca.pem"); }
  std::string other_ca() const { return file("other-ca.pem"); }
  std::string server_cert() const { return file("server.pem"); }
  std::string server_key() const { return file("server.key"); }
  std::string client_cert() const { return file("client.pem"); }
  std::string client_key() const { return file("client.key"); }
  /// The client key encrypted with the passphrase "secret" (PKCS#8).
  std::string client_key_encrypted() const { return file("client-encrypted.key"); }
  std::string stranger_cert() const { return file("stranger.pem"); }
  std::string stranger_key() const { return file("stranger.key"); }

 private:
  struct FreeKey {
    void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
  };
  struct FreeCert {
    void operator()(X509* cert) const { X509_free(cert); }
  };
  using Key = std::unique_ptr<EVP_PKEY, FreeKey>;
  using Cert = std::unique_ptr<X509, FreeCert>;
  struct Authority {
    Key key;
    Cert cert;
  };

  static int next_id() {
    static int id = 0;
    return id++;
  }
  static bool looks_like_ip(const std::string& name) {
    return name.find_first_not_of("0123456789.") == std::string::npos || name.find(':') != std::string::npos;
  }
  static void check(bool ok, const char* what) {
    if (!ok) throw std::runtime_error(std::string("making test certificates: ") + what + " failed");
  }
  static Key make_key() {
    Key key(EVP_EC_gen("P-256"));
    check(key != nullptr, "EVP_EC_gen");
    return key;
  }
  static void add_extension(X509* cert, X509* issuer, int nid, const std::string& value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
    X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
    check(extension != nullptr, "X509V3_EXT_conf_nid");
    X509_add_ext(cert, extension, -1);
    X509_EXTENSION_free(extension);
  }
  /// A certificate for `key` named `common_name`, signed by `issuer` (itself when null).
  static Cert sign(const Authority* issuer, EVP_PKEY* key, const std::string& common_name, bool is_ca,
                   const std::string& alt_names, const std::string& usage) {
    static long serial = 1;
    Cert cert(X509_new());
    check(cert != nullptr, "X509_new");
    X509_set_version(cert.get(), 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial++);
    X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
    X509_set_pubkey(cert.get(), key);
    X509_NAME* name = X509_get_subject_name(cert.get());
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(common_name.c_str()),
                               -1, -1, 0);
    X509* issuer_cert = issuer ? issuer->cert.get() : cert.get();
    X509_set_issuer_name(cert.get(), X509_get_subject_name(issuer_cert));
    add_extension(cert.get(), issuer_cert, NID_basic_constraints, is_ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
    add_extension(cert.get(), issuer_cert, NID_key_usage,
                  is_ca ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature,keyEncipherment");
    add_extension(cert.get(), issuer_cert, NID_subject_key_identifier, "hash");
    if (issuer) add_extension(cert.get(), issuer_cert, NID_authority_key_identifier, "keyid");
    if (!alt_names.empty()) add_extension(cert.get(), issuer_cert, NID_subject_alt_name, alt_names);
    if (!usage.empty()) add_extension(cert.get(), issuer_cert, NID_ext_key_usage, usage);
    check(X509_sign(cert.get(), issuer ? issuer->key.get() : key, EVP_sha256()) > 0, "X509_sign");
    return cert;
  }
  static Authority make_authority(const std::string& common_name) {
    Authority ca{make_key(), nullptr};
    ca.cert = sign(nullptr, ca.key.get(), common_name, true, "", "");
    return ca;
  }

  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  void write(X509* cert, EVP_PKEY* key, const std::string& stem) const {
    std::FILE* out = std::fopen(file(stem + ".pem").c_str(), "w");
    check(out != nullptr && PEM_write_X509(out, cert) == 1, "writing a certificate");
    std::fclose(out);
    out = std::fopen(file(stem + ".key").c_str(), "w");
    check(out != nullptr && PEM_write_PrivateKey(out, key, nullptr, nullptr, 0, nullptr, nullptr) == 1,
          "writing a key");
    std::fclose(out);
  }

  std::filesystem::path dir_;
};

}  // namespace ddprun::testing
