#include "cli/rules_render.h"

#include <algorithm>

#include "model/json.h"

namespace ad::cli {
namespace {

std::string_view MatchKindName(MatchKind k) {
  switch (k) {
    case MatchKind::kProtocol:
      return "protocol";
    case MatchKind::kSrcAddr:
      return "src_addr";
    case MatchKind::kDstAddr:
      return "dst_addr";
    case MatchKind::kSrcPort:
      return "src_port";
    case MatchKind::kDstPort:
      return "dst_port";
    case MatchKind::kInIface:
      return "in_iface";
    case MatchKind::kOutIface:
      return "out_iface";
    case MatchKind::kMark:
      return "mark";
    case MatchKind::kConnmark:
      return "connmark";
    case MatchKind::kSet:
      return "set";
    case MatchKind::kSocketExists:
      return "socket_exists";
    case MatchKind::kSocketUid:
      return "socket_uid";
    case MatchKind::kSocketGid:
      return "socket_gid";
    case MatchKind::kCtState:
      return "ct_state";
    case MatchKind::kAddrType:
      return "addr_type";
    case MatchKind::kUnknown:
      return "unknown";
  }
  return "unknown";
}

std::string_view ActionKindName(ActionKind k) {
  switch (k) {
    case ActionKind::kContinue:
      return "continue";
    case ActionKind::kAccept:
      return "accept";
    case ActionKind::kDrop:
      return "drop";
    case ActionKind::kReject:
      return "reject";
    case ActionKind::kReturn:
      return "return";
    case ActionKind::kJump:
      return "jump";
    case ActionKind::kGoto:
      return "goto";
    case ActionKind::kRedirect:
      return "redirect";
    case ActionKind::kDnat:
      return "dnat";
    case ActionKind::kSnat:
      return "snat";
    case ActionKind::kMasquerade:
      return "masquerade";
    case ActionKind::kTproxy:
      return "tproxy";
    case ActionKind::kSetMark:
      return "set_mark";
    case ActionKind::kSetConnmark:
      return "set_connmark";
    case ActionKind::kRestoreConnmark:
      return "restore_connmark";
    case ActionKind::kSaveConnmark:
      return "save_connmark";
    case ActionKind::kCtZone:
      return "ct_zone";
    case ActionKind::kNotrack:
      return "notrack";
    case ActionKind::kLog:
      return "log";
    case ActionKind::kVerdictMap:
      return "verdict_map";
    case ActionKind::kUnknown:
      return "unknown";
  }
  return "unknown";
}

bool IsIptables(Backend b) { return b != Backend::kNft; }

std::string Upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), ::toupper);
  return s;
}

int HookOrder(const std::string& hook) {
  static const char* kOrder[] = {"prerouting", "input", "forward", "output", "postrouting"};
  for (int i = 0; i < 5; ++i) {
    if (hook == kOrder[i]) return i;
  }
  return 5;
}

// iptables-save order: built-in chains in hook order, then user chains by name.
std::vector<const Chain*> SaveOrder(const Table& t) {
  std::vector<const Chain*> chains;
  for (const auto& c : t.chains) chains.push_back(&c);
  std::stable_sort(chains.begin(), chains.end(), [](const Chain* a, const Chain* b) {
    if (a->is_base != b->is_base) return a->is_base;
    if (a->is_base) return HookOrder(a->hook) < HookOrder(b->hook);
    return a->name < b->name;
  });
  return chains;
}

void RenderIptablesTable(const Table& t, std::string& out) {
  out += "*" + t.name + "\n";
  const std::vector<const Chain*> chains = SaveOrder(t);
  for (const Chain* chain : chains) {
    const Chain& c = *chain;
    out += ":" + c.name + " " + (c.is_base ? Upper(c.policy.empty() ? "accept" : c.policy) : "-") +
           "\n";
  }
  for (const Chain* c : chains) {
    for (const auto& r : c->rules) out += RenderRule(t.backend, t.family, c->name, r) + "\n";
  }
  out += "COMMIT\n";
}

void RenderNftTable(const Table& t, std::string& out) {
  out += "table " + std::string(NftFamilyKeyword(t.family)) + " " + t.name + " {\n";
  for (const auto& s : t.sets) {
    const bool map = !s.data_type.empty();
    out += std::string(map ? "\tmap " : "\tset ") + s.name + " {\n\t\ttype " + s.key_type +
           (map ? " : " + s.data_type : "") + "\n";
    if (s.interval) out += "\t\tflags interval\n";
    if (!s.comment.empty()) out += "\t\tcomment \"" + s.comment + "\"\n";
    if (!s.elements.empty()) {
      out += "\t\telements = { ";
      for (size_t i = 0; i < s.elements.size(); ++i) out += (i ? ", " : "") + s.elements[i];
      out += " }\n";
    }
    out += "\t}\n";
  }
  for (const auto& c : t.chains) {
    out += "\tchain " + c.name + " {\n";
    if (c.is_base) {
      out += "\t\ttype " + c.type + " hook " + c.hook + " priority " + std::to_string(c.priority) +
             "; policy " + (c.policy.empty() ? "accept" : c.policy) + ";\n";
    }
    for (const auto& r : c.rules) out += "\t\t" + RenderRule(t, c.name, r) + "\n";
    out += "\t}\n";
  }
  out += "}\n";
}

}  // namespace

std::string RenderRulesText(const NetnsSnapshot& ns, const NetnsClassification& c) {
  std::string out;
  out += "# netns " + ns.netns.PrimaryPath() + " (inode " + std::to_string(ns.netns.inode) + ")" +
         (ns.netns.is_host ? " host" : "") + "\n";
  out += "# mode " + std::string(DataplaneModeName(c.mode));
  if (c.variant) out += ", variant " + c.variant->Describe();
  out += "\n";
  for (const auto& e : ns.errors)
    out += "# error: " + std::string(e.source()) + ": " + e.message + "\n";
  if (ns.unreadable) return out;

  // Group: iptables backends (legacy, then nft) per family, then native nft tables.
  for (Backend backend : {Backend::kIptablesLegacy, Backend::kIptablesNft, Backend::kNft}) {
    for (Family family : {Family::kIpv4, Family::kIpv6, Family::kInet, Family::kOther}) {
      bool header = false;
      for (const auto& t : ns.netfilter.tables) {
        if (t.backend != backend || t.family != family) continue;
        if (!header) {
          out += "\n# " + std::string(BackendName(backend)) + " " +
                 std::string(FamilyName(family)) + "\n";
          header = true;
        }
        if (IsIptables(backend)) {
          RenderIptablesTable(t, out);
        } else {
          RenderNftTable(t, out);
        }
      }
    }
  }
  if (!ns.netfilter.ipsets.empty()) {
    out += "\n# ipset\n";
    for (const auto& s : ns.netfilter.ipsets) {
      out += "create " + s.name + " " + s.type + " family " +
             (s.family == Family::kIpv6 ? "inet6" : "inet") + "\n";
      for (const auto& m : s.members) out += "add " + s.name + " " + m + "\n";
    }
  }
  out += "\n# policy routing\n";
  for (const auto& r : ns.routing.rules) {
    char mark[64] = "";
    if (r.fwmark || r.fwmask) {
      std::snprintf(mark, sizeof(mark), " fwmark 0x%x/0x%x", r.fwmark, r.fwmask);
    }
    out += std::string(r.family == Family::kIpv6 ? "ip -6 rule: " : "ip rule: ") +
           std::to_string(r.priority) + ":" + mark + " " + r.action + " " +
           std::to_string(r.table) + "\n";
  }
  for (const auto& r : ns.routing.routes) {
    out += std::string(r.family == Family::kIpv6 ? "ip -6 route: " : "ip route: ") + r.type + " " +
           r.dst + " dev " + r.dev + " table " + std::to_string(r.table) + "\n";
  }
  return out;
}

std::string RenderRulesJson(const NetnsSnapshot& ns, const NetnsClassification& c) {
  JsonWriter j;
  j.BeginObject();
  j.Field("schema", kRulesSchema);
  j.Key("netns").BeginObject();
  j.Field("path", ns.netns.PrimaryPath());
  j.Field("inode", ns.netns.inode);
  j.Field("host", ns.netns.is_host);
  j.EndObject();
  j.Field("mode", DataplaneModeName(c.mode));
  j.Key("variant");
  if (c.variant) {
    j.String(c.variant->Describe());
  } else {
    j.Null();
  }
  j.Key("errors").BeginArray();
  for (const auto& e : ns.errors) {
    j.BeginObject().Field("source", e.source()).Field("message", e.message).EndObject();
  }
  j.EndArray();
  j.Key("tables").BeginArray();
  for (const auto& t : ns.netfilter.tables) {
    j.BeginObject();
    j.Field("backend", BackendName(t.backend));
    j.Field("family", FamilyName(t.family));
    j.Field("name", t.name);
    j.Key("chains").BeginArray();
    for (const auto& ch : t.chains) {
      j.BeginObject();
      j.Field("name", ch.name);
      j.Field("base", ch.is_base);
      if (ch.is_base) {
        j.Field("hook", ch.hook).Field("priority", static_cast<int64_t>(ch.priority));
        j.Field("type", ch.type).Field("policy", ch.policy);
      }
      j.Key("rules").BeginArray();
      for (const auto& r : ch.rules) {
        j.BeginObject();
        j.Field("text", RenderRule(t, ch.name, r));
        if (r.handle) j.Field("handle", r.handle);
        if (!r.comment.empty()) j.Field("comment", r.comment);
        j.Key("matches").BeginArray();
        for (const auto& m : r.sem.matches) {
          j.BeginObject().Field("kind", MatchKindName(m.kind)).Field("negated", m.negated);
          j.Field("value", m.value).Field("value2", m.value2).Field("text", m.text);
          if (!m.elements.empty()) j.StringArray("elements", m.elements);
          j.EndObject();
        }
        j.EndArray();
        j.Key("action").BeginObject().Field("kind", ActionKindName(r.sem.action.kind));
        j.Field("value", r.sem.action.value).Field("value2", r.sem.action.value2);
        j.Field("value3", r.sem.action.value3).Field("text", r.sem.action.text);
        if (!r.sem.action.elements.empty()) j.StringArray("elements", r.sem.action.elements);
        j.EndObject();
        j.EndObject();
      }
      j.EndArray();
      j.EndObject();
    }
    j.EndArray();
    j.Key("sets").BeginArray();
    for (const auto& s : t.sets) {
      j.BeginObject().Field("name", s.name).Field("type", s.key_type);
      if (!s.data_type.empty()) j.Field("data_type", s.data_type);
      if (s.anonymous) j.Field("anonymous", true);
      j.StringArray("elements", s.elements).EndObject();
    }
    j.EndArray();
    j.EndObject();
  }
  j.EndArray();
  j.Key("ipsets").BeginArray();
  for (const auto& s : ns.netfilter.ipsets) {
    j.BeginObject().Field("name", s.name).Field("type", s.type);
    j.Field("family", FamilyName(s.family)).StringArray("members", s.members).EndObject();
  }
  j.EndArray();
  j.Key("routing").BeginObject();
  j.Key("rules").BeginArray();
  for (const auto& r : ns.routing.rules) {
    j.BeginObject().Field("family", FamilyName(r.family)).Field("priority", r.priority);
    j.Field("fwmark", r.fwmark).Field("fwmask", r.fwmask).Field("table", r.table);
    j.Field("action", r.action).EndObject();
  }
  j.EndArray();
  j.Key("routes").BeginArray();
  for (const auto& r : ns.routing.routes) {
    j.BeginObject().Field("family", FamilyName(r.family)).Field("table", r.table);
    j.Field("type", r.type).Field("dst", r.dst).Field("dev", r.dev).EndObject();
  }
  j.EndArray();
  j.Key("addresses").BeginArray();
  for (const auto& a : ns.routing.addresses) {
    j.BeginObject().Field("ifname", a.ifname).Field("family", FamilyName(a.family));
    j.Field("address", a.address).Field("prefix_len", static_cast<uint32_t>(a.prefix_len));
    j.Field("global", a.global_scope).EndObject();
  }
  j.EndArray();
  j.Field("ipv6_disabled", ns.routing.ipv6_disabled);
  j.EndObject();
  j.EndObject();
  return j.str();
}

}  // namespace ad::cli
