// A throw-away PKI for TLS tests, made with the openssl CLI in a temp dir at test time: two CAs
// (the trusted one and an "other" one), a server certificate (SAN 127.0.0.1, ::1, localhost) and
// client certificates signed by each CA. EC P-256 keys, valid for two days. The directory is
// removed on destruction.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ad::testing {

class TestPki {
 public:
  TestPki() {
    char tmpl[] = "/tmp/ad-tls-pki-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      error_ = "mkdtemp failed";
      return;
    }
    dir_ = tmpl;
    if (std::system("command -v openssl >/dev/null 2>&1") != 0) {
      error_ = "the openssl CLI is not installed (scripts/setup installs it)";
      return;
    }
    Write("server.ext",
          "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\n"
          "extendedKeyUsage=serverAuth\n");
    Write("client.ext", "extendedKeyUsage=clientAuth\n");
    ok_ = MakeCa("ca") && MakeCa("other-ca") && MakeLeaf("server", "ca", "server.ext") &&
          MakeLeaf("client", "ca", "client.ext") &&
          MakeLeaf("other-client", "other-ca", "client.ext") &&
          MakeLeaf("other-server", "other-ca", "server.ext") && MakeEncryptedKey();
  }
  ~TestPki() {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  TestPki(const TestPki&) = delete;
  TestPki& operator=(const TestPki&) = delete;

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  const std::string& dir() const { return dir_; }

  // name.crt / name.key for name in ca, other-ca, server, client, other-client, other-server;
  // "encrypted.key" is server.key under a passphrase.
  std::string Path(const std::string& file) const { return dir_ + "/" + file; }
  std::string Read(const std::string& file) const {
    std::ifstream in(Path(file));
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  void Write(const std::string& file, const std::string& text) const {
    std::ofstream(Path(file)) << text;
  }

 private:
  bool Run(const std::string& command) {
    const std::string full = "cd '" + dir_ + "' && " + command + " >>openssl.log 2>&1";
    const int status = std::system(full.c_str());
    if (status != 0) {
      error_ = "openssl failed: " + command + "\n" + Read("openssl.log");
      return false;
    }
    return true;
  }
  bool MakeCa(const std::string& name) {
    return Run(
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
        "-subj /CN=ambient-doctor-test-" +
        name + " -keyout " + name + ".key -out " + name + ".crt");
  }
  bool MakeLeaf(const std::string& name, const std::string& ca, const std::string& ext) {
    return Run("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=" +
               name + " -keyout " + name + ".key -out " + name + ".csr") &&
           Run("openssl x509 -req -in " + name + ".csr -CA " + ca + ".crt -CAkey " + ca +
               ".key -CAcreateserial -days 2 -extfile " + ext + " -out " + name + ".crt");
  }
  bool MakeEncryptedKey() {
    return Run("openssl pkey -in server.key -aes256 -passout pass:secret -out encrypted.key");
  }

  std::string dir_;
  std::string error_;
  bool ok_ = false;
};

}  // namespace ad::testing
