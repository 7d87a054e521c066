// Model <-> proto for one network namespace: its record, reads, netfilter rules of every backend,
// routing and listeners.
#include <cstdint>
#include <string>
#include <vector>

#include "capture/capture_proto.h"

namespace ad::capture {
namespace {

constexpr EnumPair<Backend, pb::CaptureBackend> kBackends[] = {
    {Backend::kIptablesLegacy, pb::CAPTURE_BACKEND_IPTABLES_LEGACY},
    {Backend::kIptablesNft, pb::CAPTURE_BACKEND_IPTABLES_NFT},
    {Backend::kNft, pb::CAPTURE_BACKEND_NFT},
};
static_assert(CoversEnum(kBackends, static_cast<size_t>(Backend::kNft) + 1));

constexpr EnumPair<Family, pb::CaptureFamily> kFamilies[] = {
    {Family::kIpv4, pb::CAPTURE_FAMILY_IPV4},
    {Family::kIpv6, pb::CAPTURE_FAMILY_IPV6},
    {Family::kInet, pb::CAPTURE_FAMILY_INET},
    {Family::kOther, pb::CAPTURE_FAMILY_OTHER},
};
static_assert(CoversEnum(kFamilies, static_cast<size_t>(Family::kOther) + 1));

constexpr EnumPair<MatchKind, pb::CaptureMatchKind> kMatchKinds[] = {
    {MatchKind::kProtocol, pb::CAPTURE_MATCH_KIND_PROTOCOL},
    {MatchKind::kSrcAddr, pb::CAPTURE_MATCH_KIND_SRC_ADDR},
    {MatchKind::kDstAddr, pb::CAPTURE_MATCH_KIND_DST_ADDR},
    {MatchKind::kSrcPort, pb::CAPTURE_MATCH_KIND_SRC_PORT},
    {MatchKind::kDstPort, pb::CAPTURE_MATCH_KIND_DST_PORT},
    {MatchKind::kInIface, pb::CAPTURE_MATCH_KIND_IN_IFACE},
    {MatchKind::kOutIface, pb::CAPTURE_MATCH_KIND_OUT_IFACE},
    {MatchKind::kMark, pb::CAPTURE_MATCH_KIND_MARK},
    {MatchKind::kConnmark, pb::CAPTURE_MATCH_KIND_CONNMARK},
    {MatchKind::kSet, pb::CAPTURE_MATCH_KIND_SET},
    {MatchKind::kSocketExists, pb::CAPTURE_MATCH_KIND_SOCKET_EXISTS},
    {MatchKind::kSocketUid, pb::CAPTURE_MATCH_KIND_SOCKET_UID},
    {MatchKind::kSocketGid, pb::CAPTURE_MATCH_KIND_SOCKET_GID},
    {MatchKind::kCtState, pb::CAPTURE_MATCH_KIND_CT_STATE},
    {MatchKind::kAddrType, pb::CAPTURE_MATCH_KIND_ADDR_TYPE},
    {MatchKind::kUnknown, pb::CAPTURE_MATCH_KIND_UNKNOWN},
};
static_assert(CoversEnum(kMatchKinds, static_cast<size_t>(MatchKind::kUnknown) + 1));

constexpr EnumPair<ActionKind, pb::CaptureActionKind> kActionKinds[] = {
    {ActionKind::kContinue, pb::CAPTURE_ACTION_KIND_CONTINUE},
    {ActionKind::kAccept, pb::CAPTURE_ACTION_KIND_ACCEPT},
    {ActionKind::kDrop, pb::CAPTURE_ACTION_KIND_DROP},
    {ActionKind::kReject, pb::CAPTURE_ACTION_KIND_REJECT},
    {ActionKind::kReturn, pb::CAPTURE_ACTION_KIND_RETURN},
    {ActionKind::kJump, pb::CAPTURE_ACTION_KIND_JUMP},
    {ActionKind::kGoto, pb::CAPTURE_ACTION_KIND_GOTO},
    {ActionKind::kRedirect, pb::CAPTURE_ACTION_KIND_REDIRECT},
    {ActionKind::kDnat, pb::CAPTURE_ACTION_KIND_DNAT},
    {ActionKind::kSnat, pb::CAPTURE_ACTION_KIND_SNAT},
    {ActionKind::kMasquerade, pb::CAPTURE_ACTION_KIND_MASQUERADE},
    {ActionKind::kTproxy, pb::CAPTURE_ACTION_KIND_TPROXY},
    {ActionKind::kSetMark, pb::CAPTURE_ACTION_KIND_SET_MARK},
    {ActionKind::kSetConnmark, pb::CAPTURE_ACTION_KIND_SET_CONNMARK},
    {ActionKind::kRestoreConnmark, pb::CAPTURE_ACTION_KIND_RESTORE_CONNMARK},
    {ActionKind::kSaveConnmark, pb::CAPTURE_ACTION_KIND_SAVE_CONNMARK},
    {ActionKind::kCtZone, pb::CAPTURE_ACTION_KIND_CT_ZONE},
    {ActionKind::kNotrack, pb::CAPTURE_ACTION_KIND_NOTRACK},
    {ActionKind::kLog, pb::CAPTURE_ACTION_KIND_LOG},
    {ActionKind::kVerdictMap, pb::CAPTURE_ACTION_KIND_VERDICT_MAP},
    {ActionKind::kUnknown, pb::CAPTURE_ACTION_KIND_UNKNOWN},
};
static_assert(CoversEnum(kActionKinds, static_cast<size_t>(ActionKind::kUnknown) + 1));

constexpr EnumPair<ReadStatus, pb::CaptureReadStatus> kReadStatuses[] = {
    {ReadStatus::kNotRead, pb::CAPTURE_READ_STATUS_NOT_READ},
    {ReadStatus::kOk, pb::CAPTURE_READ_STATUS_OK},
    {ReadStatus::kFailed, pb::CAPTURE_READ_STATUS_FAILED},
};
static_assert(CoversEnum(kReadStatuses, static_cast<size_t>(ReadStatus::kFailed) + 1));

// A read whose status this reader does not know did not give it usable data.
ReadStatus GetReadStatus(int value) {
  return EnumFromProto(kReadStatuses, value, ReadStatus::kFailed);
}

// --- netfilter ----------------------------------------------------------------------------------

void PutMatch(const Match& in, pb::CaptureMatch* out) {
  out->set_kind(EnumToProto(kMatchKinds, in.kind));
  out->set_negated(in.negated);
  out->set_value(in.value);
  out->set_value2(in.value2);
  out->set_text(in.text);
  PutValues(in.elements, out->mutable_elements());
}

// A match kind this reader does not know is kept as an undecoded match (never as a weaker one).
Match GetMatch(const pb::CaptureMatch& in) {
  return {.kind = EnumFromProto(kMatchKinds, in.kind(), MatchKind::kUnknown),
          .negated = in.negated(),
          .value = in.value(),
          .value2 = in.value2(),
          .text = in.text(),
          .elements = GetStrings(in.elements())};
}

void PutRule(const Rule& in, pb::CaptureRule* out) {
  pb::CaptureRuleSemantics* sem = out->mutable_sem();
  PutList(in.sem.matches, sem->mutable_matches(), PutMatch);
  pb::CaptureAction* action = sem->mutable_action();
  action->set_kind(EnumToProto(kActionKinds, in.sem.action.kind));
  action->set_value(in.sem.action.value);
  action->set_value2(in.sem.action.value2);
  action->set_value3(in.sem.action.value3);
  action->set_text(in.sem.action.text);
  PutValues(in.sem.action.elements, action->mutable_elements());
  out->set_comment(in.comment);
  out->set_handle(in.handle);
  out->set_has_counter(in.has_counter);
}

Rule GetRule(const pb::CaptureRule& in) {
  const pb::CaptureAction& action = in.sem().action();
  return {
      .sem = {.matches = GetList(in.sem().matches(), GetMatch),
              .action = {.kind = EnumFromProto(kActionKinds, action.kind(), ActionKind::kUnknown),
                         .value = action.value(),
                         .value2 = action.value2(),
                         .value3 = action.value3(),
                         .text = action.text(),
                         .elements = GetStrings(action.elements())}},
      .comment = in.comment(),
      .handle = in.handle(),
      .has_counter = in.has_counter()};
}

void PutChain(const Chain& in, pb::CaptureChain* out) {
  out->set_name(in.name);
  out->set_is_base(in.is_base);
  out->set_hook(in.hook);
  out->set_priority(in.priority);
  out->set_type(in.type);
  out->set_policy(in.policy);
  PutList(in.rules, out->mutable_rules(), PutRule);
}

Chain GetChain(const pb::CaptureChain& in) {
  return {.name = in.name(),
          .is_base = in.is_base(),
          .hook = in.hook(),
          .priority = in.priority(),
          .type = in.type(),
          .policy = in.policy(),
          .rules = GetList(in.rules(), GetRule)};
}

void PutNftSet(const NftSet& in, pb::CaptureNftSet* out) {
  out->set_name(in.name);
  out->set_key_type(in.key_type);
  out->set_comment(in.comment);
  PutValues(in.elements, out->mutable_elements());
  out->set_data_type(in.data_type);
  out->set_anonymous(in.anonymous);
  out->set_interval(in.interval);
}

NftSet GetNftSet(const pb::CaptureNftSet& in) {
  return {.name = in.name(),
          .key_type = in.key_type(),
          .comment = in.comment(),
          .elements = GetStrings(in.elements()),
          .data_type = in.data_type(),
          .anonymous = in.anonymous(),
          .interval = in.interval()};
}

void PutTable(const Table& in, pb::CaptureTable* out) {
  out->set_backend(EnumToProto(kBackends, in.backend));
  out->set_family(PutFamily(in.family));
  out->set_name(in.name);
  PutList(in.chains, out->mutable_chains(), PutChain);
  PutList(in.sets, out->mutable_sets(), PutNftSet);
  pb::CaptureNftTableUserdata* userdata = out->mutable_userdata();
  userdata->set_comment(in.userdata.comment);
  userdata->set_creator_version(in.userdata.creator_version);
  if (in.userdata.creator_build_time != -1) {
    userdata->set_creator_build_time(in.userdata.creator_build_time);
  }
  userdata->set_error(in.userdata.error);
}

Table GetTable(const pb::CaptureTable& in) {
  const pb::CaptureNftTableUserdata& userdata = in.userdata();
  return {.backend = EnumFromProto(kBackends, in.backend(), Backend::kNft),
          .family = GetFamily(in.family()),
          .name = in.name(),
          .chains = GetList(in.chains(), GetChain),
          .sets = GetList(in.sets(), GetNftSet),
          .userdata = {.comment = userdata.comment(),
                       .creator_version = userdata.creator_version(),
                       .creator_build_time = userdata.has_creator_build_time()
                                                 ? userdata.creator_build_time()
                                                 : int64_t{-1},
                       .error = userdata.error()}};
}

void PutIpSet(const IpSet& in, pb::CaptureIpSet* out) {
  out->set_name(in.name);
  out->set_type(in.type);
  out->set_family(PutFamily(in.family));
  PutValues(in.members, out->mutable_members());
}

IpSet GetIpSet(const pb::CaptureIpSet& in) {
  return {.name = in.name(),
          .type = in.type(),
          .family = GetFamily(in.family()),
          .members = GetStrings(in.members())};
}

void PutNetfilter(const NetfilterState& in, pb::CaptureNetfilter* out) {
  PutList(in.tables, out->mutable_tables(), PutTable);
  PutList(in.ipsets, out->mutable_ipsets(), PutIpSet);
  PutValues(in.legacy_tables_v4, out->mutable_legacy_tables_v4());
  PutValues(in.legacy_tables_v6, out->mutable_legacy_tables_v6());
}

NetfilterState GetNetfilter(const pb::CaptureNetfilter& in) {
  return {.tables = GetList(in.tables(), GetTable),
          .ipsets = GetList(in.ipsets(), GetIpSet),
          .legacy_tables_v4 = GetStrings(in.legacy_tables_v4()),
          .legacy_tables_v6 = GetStrings(in.legacy_tables_v6())};
}

// --- routing ------------------------------------------------------------------------------------

void PutPolicyRule(const PolicyRule& in, pb::CapturePolicyRule* out) {
  out->set_family(PutFamily(in.family));
  out->set_priority(in.priority);
  out->set_fwmark(in.fwmark);
  out->set_fwmask(in.fwmask);
  out->set_table(in.table);
  out->set_action(in.action);
}

PolicyRule GetPolicyRule(const pb::CapturePolicyRule& in) {
  return {.family = GetFamily(in.family()),
          .priority = in.priority(),
          .fwmark = in.fwmark(),
          .fwmask = in.fwmask(),
          .table = in.table(),
          .action = in.action()};
}

void PutRoute(const RouteEntry& in, pb::CaptureRoute* out) {
  out->set_family(PutFamily(in.family));
  out->set_table(in.table);
  out->set_type(in.type);
  out->set_dst(in.dst);
  out->set_dev(in.dev);
}

RouteEntry GetRoute(const pb::CaptureRoute& in) {
  return {.family = GetFamily(in.family()),
          .table = in.table(),
          .type = in.type(),
          .dst = in.dst(),
          .dev = in.dev()};
}

void PutAddress(const InterfaceAddress& in, pb::CaptureInterfaceAddress* out) {
  out->set_ifname(in.ifname);
  out->set_family(PutFamily(in.family));
  out->set_address(in.address);
  out->set_prefix_len(in.prefix_len);
  out->set_global_scope(in.global_scope);
}

InterfaceAddress GetAddress(const pb::CaptureInterfaceAddress& in) {
  return {.ifname = in.ifname(),
          .family = GetFamily(in.family()),
          .address = in.address(),
          .prefix_len = static_cast<uint8_t>(in.prefix_len()),
          .global_scope = in.global_scope()};
}

void PutRouting(const RoutingState& in, pb::CaptureRouting* out) {
  PutList(in.rules, out->mutable_rules(), PutPolicyRule);
  PutList(in.routes, out->mutable_routes(), PutRoute);
  PutList(in.addresses, out->mutable_addresses(), PutAddress);
  out->set_ipv6_disabled(in.ipv6_disabled);
  pb::CaptureLoopbackLink* lo = out->mutable_loopback();
  lo->set_known(in.loopback.known);
  lo->set_found(in.loopback.found);
  lo->set_up(in.loopback.up);
  lo->set_flags(in.loopback.flags);
}

RoutingState GetRouting(const pb::CaptureRouting& in) {
  const pb::CaptureLoopbackLink& lo = in.loopback();
  return {
      .rules = GetList(in.rules(), GetPolicyRule),
      .routes = GetList(in.routes(), GetRoute),
      .addresses = GetList(in.addresses(), GetAddress),
      .ipv6_disabled = in.ipv6_disabled(),
      .loopback = {.known = lo.known(), .found = lo.found(), .up = lo.up(), .flags = lo.flags()}};
}

// --- listeners, record, reads -------------------------------------------------------------------

void PutListener(const ListeningSocket& in, pb::CaptureListeningSocket* out) {
  out->set_family(PutFamily(in.family));
  out->set_protocol(in.protocol);
  out->set_address(in.address);
  out->set_port(in.port);
  out->set_mark(in.mark);
  out->set_inode(in.inode);
  PutValues(in.owner_pids, out->mutable_owner_pids());
  out->set_mark_known(in.mark_known);
}

ListeningSocket GetListener(const pb::CaptureListeningSocket& in) {
  return {.family = GetFamily(in.family()),
          .protocol = static_cast<uint8_t>(in.protocol()),
          .address = in.address(),
          .port = static_cast<uint16_t>(in.port()),
          .mark = in.mark(),
          .inode = in.inode(),
          .owner_pids = GetValues<int>(in.owner_pids()),
          .mark_known = in.mark_known()};
}

void PutReads(const NetnsReads& in, pb::CaptureNetnsReads* out) {
  auto put = [](ReadStatus status) { return EnumToProto(kReadStatuses, status); };
  out->set_nftables(put(in.nftables));
  out->set_legacy_v4(put(in.legacy_v4));
  out->set_legacy_v6(put(in.legacy_v6));
  out->set_routes(put(in.routes));
  out->set_listeners(put(in.listeners));
  out->set_ipsets(put(in.ipsets));
  out->set_dns_udp(put(in.dns_udp));
}

NetnsReads GetReads(const pb::CaptureNetnsReads& in) {
  return {.nftables = GetReadStatus(in.nftables()),
          .legacy_v4 = GetReadStatus(in.legacy_v4()),
          .legacy_v6 = GetReadStatus(in.legacy_v6()),
          .routes = GetReadStatus(in.routes()),
          .listeners = GetReadStatus(in.listeners()),
          .ipsets = GetReadStatus(in.ipsets()),
          .dns_udp = GetReadStatus(in.dns_udp())};
}

}  // namespace

pb::CaptureFamily PutFamily(Family family) { return EnumToProto(kFamilies, family); }
Family GetFamily(int family) { return EnumFromProto(kFamilies, family, Family::kOther); }

void PutNetns(const NetnsSnapshot& in, pb::CaptureNetns* out) {
  pb::CaptureNetnsRecord* record = out->mutable_netns();
  record->set_dev(in.netns.dev);
  record->set_inode(in.netns.inode);
  PutValues(in.netns.paths, record->mutable_paths());
  PutValues(in.netns.pids, record->mutable_pids());
  record->set_is_host(in.netns.is_host);
  PutReads(in.reads, out->mutable_reads());
  PutNetfilter(in.netfilter, out->mutable_netfilter());
  PutRouting(in.routing, out->mutable_routing());
  PutList(in.listeners, out->mutable_listeners(), PutListener);
  PutList(in.errors, out->mutable_errors(), PutSourceError);
  out->set_unreadable(in.unreadable);
  out->set_scan_ms(in.scan_ms);
}

NetnsSnapshot GetNetns(const pb::CaptureNetns& in) {
  const pb::CaptureNetnsRecord& record = in.netns();
  return {.netns = {.dev = record.dev(),
                    .inode = record.inode(),
                    .paths = GetStrings(record.paths()),
                    .pids = GetValues<int>(record.pids()),
                    .is_host = record.is_host()},
          .reads = GetReads(in.reads()),
          .netfilter = GetNetfilter(in.netfilter()),
          .routing = GetRouting(in.routing()),
          .listeners = GetList(in.listeners(), GetListener),
          .errors = GetList(in.errors(), GetSourceError),
          .unreadable = in.unreadable(),
          .scan_ms = in.scan_ms()};
}

}  // namespace ad::capture
