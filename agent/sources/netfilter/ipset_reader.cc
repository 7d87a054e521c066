// ReadIpSets: IPSET_CMD_LIST dump over NETLINK_NETFILTER (subsystem NFNL_SUBSYS_IPSET). List only:
// nothing here creates, flushes or swaps a set.

#include "sources/netfilter/ipset_reader.h"

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/ipset/ip_set.h>
#include <linux/netfilter/nfnetlink.h>
#include <netinet/in.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sources/netfilter/nft_reader_netlink.h"
#include "sources/netfilter/readers.h"
#include "sources/netfilter/xt_compat.h"

namespace ad {
namespace {

constexpr SourceKind kSource = SourceKind::kIpset;

// A kernel without ipset (or with an incompatible protocol) means "no sets", not a failure.
bool MeansUnsupported(int error_number) {
  return error_number == EOPNOTSUPP || error_number == EPROTONOSUPPORT || error_number == ENOENT ||
         error_number == IPSET_ERR_PROTOCOL;
}

// A list request is a header, nfgenmsg and two small attributes.
using RequestBuffer = std::array<char, 256>;

nlmsghdr* BuildListRequest(RequestBuffer& buffer, bool header_only) {
  buffer.fill(0);
  nlmsghdr* header = mnl_nlmsg_put_header(buffer.data());
  header->nlmsg_type = (NFNL_SUBSYS_IPSET << 8) | IPSET_CMD_LIST;
  header->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  auto* nfg = static_cast<nfgenmsg*>(mnl_nlmsg_put_extra_header(header, sizeof(nfgenmsg)));
  nfg->nfgen_family = NFPROTO_IPV4;  // ipset ignores it for LIST; its own tool sends this
  nfg->version = NFNETLINK_V0;
  nfg->res_id = 0;
  mnl_attr_put_u8(header, IPSET_ATTR_PROTOCOL, IPSET_PROTOCOL);
  if (header_only) {
    mnl_attr_put_u32(header, IPSET_ATTR_FLAGS | NLA_F_NET_BYTEORDER, htonl(IPSET_FLAG_LIST_HEADER));
  }
  return header;
}

Family IpSetFamily(uint8_t nfproto) {
  return nfproto == NFPROTO_IPV4   ? Family::kIpv4
         : nfproto == NFPROTO_IPV6 ? Family::kIpv6
                                   : Family::kOther;
}

// libmnl's iteration macros rely on implicit void* conversions that C++ rejects.
template <typename Visit>
void ForEachAttr(const void* start, size_t length, Visit visit) {
  const auto* begin = static_cast<const char*>(start);
  const char* end = begin + length;
  const auto* attr = reinterpret_cast<const nlattr*>(begin);
  while (mnl_attr_ok(attr, static_cast<int>(end - reinterpret_cast<const char*>(attr)))) {
    visit(attr);
    attr = mnl_attr_next(attr);
  }
}

template <typename Visit>
void ForEachNested(const nlattr* nest, Visit visit) {
  ForEachAttr(mnl_attr_get_payload(nest), mnl_attr_get_payload_len(nest), visit);
}

// Address text of an IPSET_ATTR_IP nest (IPADDR_IPV4 / IPADDR_IPV6 inside).
std::optional<std::string> NestedAddress(const nlattr* ip_nest) {
  std::optional<std::string> text;
  ForEachNested(ip_nest, [&](const nlattr* inner) {
    uint16_t type = mnl_attr_get_type(inner);
    uint16_t len = mnl_attr_get_payload_len(inner);
    const auto* bytes = static_cast<const uint8_t*>(mnl_attr_get_payload(inner));
    if (type == IPSET_ATTR_IPADDR_IPV4 && len == 4) {
      text = xt::AddressText(Family::kIpv4, bytes);
    } else if (type == IPSET_ATTR_IPADDR_IPV6 && len == 16) {
      text = xt::AddressText(Family::kIpv6, bytes);
    }
  });
  return text;
}

// One IPSET_ATTR_DATA entry of IPSET_ATTR_ADT: the member address, "/cidr" when the set stores
// networks with a shorter prefix.
std::optional<std::string> MemberText(const nlattr* data, Family family) {
  std::optional<std::string> address;
  std::optional<uint8_t> cidr;
  ForEachNested(data, [&](const nlattr* attr) {
    uint16_t type = mnl_attr_get_type(attr);
    if (type == IPSET_ATTR_IP && (attr->nla_type & NLA_F_NESTED)) {
      address = NestedAddress(attr);
    } else if (type == IPSET_ATTR_CIDR && mnl_attr_get_payload_len(attr) >= 1) {
      cidr = mnl_attr_get_u8(attr);
    }
  });
  if (!address) {
    return std::nullopt;
  }
  uint8_t full = family == Family::kIpv6 ? 128 : 32;
  if (cidr && *cidr < full) {
    *address += "/" + std::to_string(*cidr);
  }
  return address;
}

struct ListedSet {
  IpSet set;
  std::optional<uint16_t> index;
};

// Parses one list reply message. A large set spans several messages with the same name.
void ParseListMessage(const nlmsghdr* message, std::vector<ListedSet>* sets,
                      std::map<std::string, size_t>* by_name, size_t* members,
                      const ReadLimits* limits, bool* truncated) {
  std::string name;
  std::string type_name;
  std::optional<uint8_t> family;
  std::optional<uint16_t> index;
  const nlattr* adt = nullptr;
  ForEachAttr(mnl_nlmsg_get_payload_offset(message, sizeof(nfgenmsg)),
              message->nlmsg_len - MNL_NLMSG_HDRLEN - MNL_ALIGN(sizeof(nfgenmsg)),
              [&](const nlattr* attr) {
                switch (mnl_attr_get_type(attr)) {
                  case IPSET_ATTR_SETNAME:
                    if (mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) >= 0) {
                      name = mnl_attr_get_str(attr);
                    }
                    break;
                  case IPSET_ATTR_TYPENAME:
                    if (mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) >= 0) {
                      type_name = mnl_attr_get_str(attr);
                    }
                    break;
                  case IPSET_ATTR_FAMILY:
                    if (mnl_attr_get_payload_len(attr) >= 1) {
                      family = mnl_attr_get_u8(attr);
                    }
                    break;
                  case IPSET_ATTR_INDEX:
                    if (mnl_attr_get_payload_len(attr) >= 2) {
                      index = ntohs(mnl_attr_get_u16(attr));
                    }
                    break;
                  case IPSET_ATTR_ADT:
                    adt = attr;
                    break;
                  default:
                    break;
                }
              });
  if (name.empty()) {
    return;
  }
  auto [it, inserted] = by_name->try_emplace(name, sets->size());
  if (inserted) {
    sets->push_back(ListedSet{});
    sets->back().set.name = name;
  }
  ListedSet& listed = (*sets)[it->second];
  if (!type_name.empty()) {
    listed.set.type = type_name;
  }
  if (family) {
    listed.set.family = IpSetFamily(*family);
  }
  if (index) {
    listed.index = index;
  }
  if (adt == nullptr) {
    return;
  }
  ForEachNested(adt, [&](const nlattr* entry) {
    if (mnl_attr_get_type(entry) != IPSET_ATTR_DATA || *truncated) {
      return;
    }
    if (*members >= limits->max_set_elements) {
      *truncated = true;
      return;
    }
    if (auto member = MemberText(entry, listed.set.family)) {
      listed.set.members.push_back(std::move(*member));
      ++*members;
    }
  });
}

Result<std::vector<ListedSet>> ListSets(bool header_only, const ReadLimits& limits) {
  auto socket = nl::OpenNetfilterSocket(kSource);
  if (!socket) {
    return socket.error();
  }
  RequestBuffer buffer;
  nlmsghdr* request = BuildListRequest(buffer, header_only);
  std::vector<ListedSet> sets;
  std::map<std::string, size_t> by_name;
  size_t members = 0;
  bool truncated = false;
  Status listed = nl::RunRequest(
      socket->get(), request, kSource, "IPSET_CMD_LIST dump", [&](const nlmsghdr* message) {
        ParseListMessage(message, &sets, &by_name, &members, &limits, &truncated);
        return truncated ? nl::Next::kStop : nl::Next::kContinue;
      });
  if (!listed.ok()) {
    if (MeansUnsupported(listed.error().error_number)) {
      return std::vector<ListedSet>{};
    }
    return listed.error();
  }
  return sets;
}

}  // namespace

Result<std::vector<IpSet>> ReadIpSets(const ReadLimits& limits) {
  auto listed = ListSets(false, limits);
  if (!listed) {
    return listed.error();
  }
  std::vector<IpSet> sets;
  sets.reserve(listed->size());
  for (ListedSet& entry : *listed) {
    sets.push_back(std::move(entry.set));
  }
  return sets;
}

Result<std::map<uint16_t, std::string>> ReadIpSetNamesByIndex() {
  auto listed = ListSets(true, ReadLimits{});
  if (!listed) {
    return listed.error();
  }
  std::map<uint16_t, std::string> names;
  for (const ListedSet& entry : *listed) {
    if (entry.index) {
      names[*entry.index] = entry.set.name;
    }
  }
  return names;
}

std::string IpSetNameCache::Name(uint16_t index) {
  if (!names_) {
    auto names = ReadIpSetNamesByIndex();
    names_ = names ? std::move(*names) : std::map<uint16_t, std::string>{};
  }
  auto it = names_->find(index);
  return it == names_->end() ? std::string() : it->second;
}

}  // namespace ad
