#include "scan/netns_read.h"

#include <optional>
#include <utility>

#include "scan/inspector.h"
#include "sources/netns/discovery.h"
#include "sources/netns/netns_workers.h"

namespace ad {

Result<NetnsSnapshot> ReadNetnsAtPath(const std::string& path) {
  Result<NetnsRecord> found = NetnsRecordForPath(path);
  if (!found.ok()) return found.error();
  return MakeKernelInspector(ReadLimits{})->Inspect(found.value());
}

NetnsSnapshot ReadNetnsOnWorker(const NetnsRecord& record) {
  std::optional<NetnsSnapshot> read;
  NetnsWorkers::Shared().Run([&] { read = MakeKernelInspector(ReadLimits{})->Inspect(record); });
  return std::move(*read);
}

Result<NetnsSnapshot> ReadNetnsAtPathOnWorker(const std::string& path) {
  Result<NetnsRecord> found = NetnsRecordForPath(path);
  if (!found.ok()) return found.error();
  return ReadNetnsOnWorker(found.value());
}

}  // namespace ad
