// Fuzz target: nf_tables rule decoding. The input is a receive buffer of an NFT_MSG_GETRULE dump
// as the kernel sends it (one or more netlink messages); like the reader, it is split with
// mnl_cb_run, each message parsed into an nftnl_rule by libnftnl, decoded, canonicalized and
// rendered. Seeds are real rule messages captured from netns loaded by iptables-nft and nft.
//
// libmnl and libnftnl trust the kernel for what they do not check, and the kernel never sends:
// - message lengths of 2^31 or more (libmnl 1.0.4's mnl_nlmsg_ok compares them as int),
// - an expression without NFTA_EXPR_NAME, a verdict without its code or a jump without its chain
//   (libnftnl 1.2.4 dereferences the name unchecked and reads the verdict's attributes from an
//   uninitialized array), strings without their NUL (it strdup()s them),
// - an attribute of the wrong size ("nf_tables kernel ABI is broken": libnftnl calls exit()).
// The target keeps the kernel's guarantees (the buffer is cut at the first message that does not
// fit, messages without names or with incomplete verdicts are skipped, the buffer ends in zeros)
// and turns that exit() into a rejected message, so what it finds is in our decoder, not in the
// libraries' trust of the kernel. The expression being parsed at the exit() leaks inside libnftnl:
// scripts/fuzz suppresses those leaks (tests/fuzz/lsan.supp) and runs this target without per-input
// leak scans.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <libmnl/libmnl.h>
#include <libnftnl/rule.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>

#include <algorithm>
#include <csetjmp>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/rule.h"
#include "sources/netfilter/nft_reader_decode.h"
#include "sources/netfilter/nft_reader_netlink.h"

namespace {

struct RuleDeleter {
  void operator()(nftnl_rule* rule) const { nftnl_rule_free(rule); }
};

ad::Family FamilyOf(uint32_t nfproto) {
  switch (nfproto) {
    case NFPROTO_IPV4:
      return ad::Family::kIpv4;
    case NFPROTO_IPV6:
      return ad::Family::kIpv6;
    case NFPROTO_INET:
      return ad::Family::kInet;
    default:
      return ad::Family::kOther;
  }
}

// Calls `visit` for each well-formed attribute in [begin, end), as libmnl's parsers walk them.
template <typename Visit>
void ForEachAttribute(const void* begin, const void* end, Visit visit) {
  const auto* attr = static_cast<const nlattr*>(begin);
  while (mnl_attr_ok(attr, static_cast<int>(static_cast<const char*>(end) -
                                            reinterpret_cast<const char*>(attr)))) {
    visit(attr);
    attr = mnl_attr_next(attr);
  }
}

template <typename Visit>
void ForEachNested(const nlattr* nest, Visit visit) {
  const char* payload = static_cast<const char*>(mnl_attr_get_payload(nest));
  ForEachAttribute(payload, payload + mnl_attr_get_payload_len(nest), visit);
}

// A data attribute (nested NFTA_DATA_*) whose verdict has its code, and its chain when it jumps,
// as the kernel's do: libnftnl 1.2.4 reads both from an uninitialized array when they are absent.
bool VerdictsComplete(const nlattr* data) {
  bool complete = true;
  ForEachNested(data, [&](const nlattr* value) {
    if (mnl_attr_get_type(value) != NFTA_DATA_VERDICT) return;
    std::optional<int32_t> code;
    bool has_chain = false;
    ForEachNested(value, [&](const nlattr* field) {
      if (mnl_attr_get_type(field) == NFTA_VERDICT_CODE &&
          mnl_attr_get_payload_len(field) == sizeof(uint32_t)) {
        code = static_cast<int32_t>(ntohl(mnl_attr_get_u32(field)));
      }
      has_chain = has_chain || mnl_attr_get_type(field) == NFTA_VERDICT_CHAIN;
    });
    if (!code || ((*code == NFT_JUMP || *code == NFT_GOTO) && !has_chain)) complete = false;
  });
  return complete;
}

// The kernel's shape of every expression: it is named, and any attribute of its data that reads
// as a data nest has complete verdicts (which attributes are data nests depends on the
// expression; checking every one only drops a few more mutated inputs).
bool ExpressionsKernelShaped(const nlmsghdr* message) {
  if (mnl_nlmsg_get_payload_len(message) < sizeof(nfgenmsg)) return true;  // libnftnl rejects it
  bool shaped = true;
  ForEachAttribute(mnl_nlmsg_get_payload_offset(message, sizeof(nfgenmsg)),
                   mnl_nlmsg_get_payload_tail(message), [&](const nlattr* attr) {
                     if (mnl_attr_get_type(attr) != NFTA_RULE_EXPRESSIONS) return;
                     ForEachNested(attr, [&](const nlattr* element) {
                       bool has_name = false;
                       ForEachNested(element, [&](const nlattr* field) {
                         has_name = has_name || mnl_attr_get_type(field) == NFTA_EXPR_NAME;
                         if (mnl_attr_get_type(field) != NFTA_EXPR_DATA) return;
                         ForEachNested(field, [&](const nlattr* data) {
                           shaped = shaped && VerdictsComplete(data);
                         });
                       });
                       shaped = shaped && has_name;
                     });
                   });
  return shaped;
}

// Where libnftnl's exit() on an attribute of the wrong size returns to, while it parses.
std::jmp_buf* abi_breakage_escape = nullptr;

// No C++ object lives in this frame, so leaving libnftnl's frames by longjmp skips no destructor.
bool ParseRule(const nlmsghdr* message, nftnl_rule* rule) {
  std::jmp_buf escape;
  if (setjmp(escape) != 0) {
    abi_breakage_escape = nullptr;
    return false;
  }
  abi_breakage_escape = &escape;
  const bool parsed = nftnl_rule_nlmsg_parse(message, rule) >= 0;
  abi_breakage_escape = nullptr;
  return parsed;
}

int OnMessage(const nlmsghdr* message, void*) {
  if (!ExpressionsKernelShaped(message)) return MNL_CB_OK;
  std::unique_ptr<nftnl_rule, RuleDeleter> rule(nftnl_rule_alloc());
  if (!rule || !ParseRule(message, rule.get())) return MNL_CB_OK;
  const ad::Family family = FamilyOf(nftnl_rule_get_u32(rule.get(), NFTNL_RULE_FAMILY));
  // Pure stand-in for the ipset name cache: some indexes are known, others are not.
  const ad::xt::SetNameResolver resolve_ipset = [](uint16_t index) {
    return index % 2 == 0 ? "set" + std::to_string(index) : std::string();
  };
  ad::nft::DecodedRule decoded = ad::nft::DecodeRule(rule.get(), family, resolve_ipset);
  ad::Canonicalize(decoded.rule.sem);
  for (const ad::Match& match : decoded.rule.sem.matches) {
    if (match.kind == ad::MatchKind::kUnknown && match.text.empty()) std::abort();
  }
  const ad::Backend backend = decoded.has_xt ? ad::Backend::kIptablesNft : ad::Backend::kNft;
  (void)ad::RenderRule(backend, family, "CHAIN", decoded.rule);
  return MNL_CB_OK;
}

// Length of the leading messages whose nlmsg_len fits what remains, as the kernel's always do.
size_t WellFramedPrefix(const uint8_t* data, size_t size) {
  size_t offset = 0;
  while (size - offset >= sizeof(nlmsghdr)) {
    uint32_t length = 0;
    std::memcpy(&length, data + offset, sizeof(length));
    if (length < sizeof(nlmsghdr) || length > size - offset) break;
    offset = std::min(size, offset + MNL_ALIGN(length));
  }
  return offset;
}

}  // namespace

// Interposes libc's exit() for libnftnl's "kernel ABI is broken" exit while a message is parsed;
// every other caller (libFuzzer at the end of a run) gets the real one.
extern "C" void exit(int status) noexcept {  // noreturn, as <stdlib.h> declares it
  if (abi_breakage_escape != nullptr) std::longjmp(*abi_breakage_escape, 1);
  using ExitFunction = void (*)(int);
  auto real_exit = reinterpret_cast<ExitFunction>(dlsym(RTLD_NEXT, "exit"));
  real_exit(status);
  std::abort();  // unreachable: the real exit() does not return
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // No receive is larger than the reader's buffer.
  if (size > ad::nl::kReceiveBufferSize) return 0;
  // An aligned private copy, as a receive buffer would be, with zeros after the last message.
  constexpr size_t kZeroTail = 64;
  std::vector<uint32_t> buffer((size + kZeroTail) / 4);
  std::memcpy(buffer.data(), data, size);
  (void)mnl_cb_run(buffer.data(), WellFramedPrefix(data, size), 0, 0, OnMessage, nullptr);
  return 0;
}
