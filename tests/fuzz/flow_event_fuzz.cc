// Fuzzes the flow tracer's decoders of kernel bytes. The first byte picks the decoder: a raw
// ring-buffer record (struct hbone_flow_event) or an inet_diag dump with tcp_info attributes (the
// live refresh of open flows); the rest is the input.
#include <cstddef>
#include <cstdint>
#include <span>

#include "flows/flow.h"
#include "tracing/live_tcp.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::span<const uint8_t> input(data + 1, size - 1);
  if (data[0] % 2 == 0) {
    auto event = ad::DecodeFlowEvent(input, 0);
    if (event.ok()) {
      // Touch what the decoder produced so sanitizers see any bad write.
      volatile size_t sink = event->flow.tuple.src.ToString().size() +
                             event->flow.tuple.dst.ToString().size() +
                             static_cast<size_t>(event->flow.outcome);
      (void)sink;
    }
  } else {
    auto sockets = ad::DecodeLiveTcpSockets(input, 1, {15008, 15001, 15006});
    if (sockets.ok()) {
      volatile size_t sink = sockets->size();
      (void)sink;
    }
  }
  return 0;
}
