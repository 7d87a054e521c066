// kube-api-sim: the kube-apiserver emulator as a program, for trying the agent by hand.
//   kube-api-sim --cert server.crt --key server.key --token-file token [--port 6443]
//                [--objects objects.json] [--bookmark-ms 60000]
// objects.json: {"namespaces":[{...}],"nodes":[{...}],"pods":[{...}]} (v1 objects). Prints the
// URL, serves until SIGINT or SIGTERM.
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "kube_api/kube_api_server.h"

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool LoadObjects(ad::kube_sim::KubeApiServer& server, const std::string& path) {
  rapidjson::Document document;
  document.Parse(ReadFile(path).c_str());
  if (document.HasParseError() || !document.IsObject()) return false;
  const std::pair<const char*, ad::kube_sim::Resource> kinds[] = {
      {"namespaces", ad::kube_sim::Resource::kNamespaces},
      {"nodes", ad::kube_sim::Resource::kNodes},
      {"pods", ad::kube_sim::Resource::kPods}};
  for (const auto& [key, resource] : kinds) {
    if (!document.HasMember(key) || !document[key].IsArray()) continue;
    for (const auto& object : document[key].GetArray()) {
      rapidjson::StringBuffer buffer;
      rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
      object.Accept(writer);
      if (server.Upsert(resource, buffer.GetString()).empty()) return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  ad::kube_sim::KubeApiServerOptions options;
  options.port = 6443;
  std::string token_file, objects;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--cert") {
      options.cert_file = value;
    } else if (flag == "--key") {
      options.key_file = value;
    } else if (flag == "--token-file") {
      token_file = value;
    } else if (flag == "--port") {
      options.port = static_cast<uint16_t>(std::atoi(value.c_str()));
    } else if (flag == "--objects") {
      objects = value;
    } else if (flag == "--bookmark-ms") {
      options.bookmark_interval = std::chrono::milliseconds(std::atoi(value.c_str()));
    } else {
      std::cerr << "kube-api-sim: unknown flag " << flag << "\n";
      return 2;
    }
  }
  options.token = ReadFile(token_file);
  while (!options.token.empty() && options.token.back() == '\n') options.token.pop_back();
  if (options.cert_file.empty() || options.key_file.empty() || options.token.empty()) {
    std::cerr << "usage: kube-api-sim --cert FILE --key FILE --token-file FILE [--port N] "
                 "[--objects FILE] [--bookmark-ms N]\n";
    return 2;
  }
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before the server's threads start
  std::string error;
  auto server = ad::kube_sim::KubeApiServer::Start(options, &error);
  if (!server) {
    std::cerr << "kube-api-sim: " << error << "\n";
    return 1;
  }
  if (!objects.empty() && !LoadObjects(*server, objects)) {
    std::cerr << "kube-api-sim: cannot load " << objects << "\n";
    return 1;
  }
  std::cout << server->url() << std::endl;
  int signal = 0;
  sigwait(&signals, &signal);
  server->Stop();
  return 0;
}
