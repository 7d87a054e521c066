#include "cli/rules_render.h"

#include <algorithm>
#include <cstdio>
#include <string_view>
#include <vector>

#include "model/finding.h"
#include "model/json.h"

namespace ad::cli {
namespace {

namespace pb = ::ambientdoctor::v1;

bool IsIptables(const std::string& backend) { return backend != "nft"; }

std::string Upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), ::toupper);
  return s;
}

// How nft spells a table's family (FamilyName -> NftFamilyKeyword).
std::string_view NftKeyword(const std::string& family) {
  if (family == "ipv4") return "ip";
  if (family == "ipv6") return "ip6";
  if (family == "inet") return "inet";
  return "";
}

int HookOrder(const std::string& hook) {
  static const char* kOrder[] = {"prerouting", "input", "forward", "output", "postrouting"};
  for (int i = 0; i < 5; ++i) {
    if (hook == kOrder[i]) return i;
  }
  return 5;
}

// iptables-save order: built-in chains in hook order, then user chains by name.
std::vector<const pb::RuleChain*> SaveOrder(const pb::RuleTable& t) {
  std::vector<const pb::RuleChain*> chains;
  for (const auto& c : t.chains()) chains.push_back(&c);
  std::stable_sort(chains.begin(), chains.end(),
                   [](const pb::RuleChain* a, const pb::RuleChain* b) {
                     if (a->base() != b->base()) return a->base();
                     if (a->base()) return HookOrder(a->hook()) < HookOrder(b->hook());
                     return a->name() < b->name();
                   });
  return chains;
}

void RenderIptablesTable(const pb::RuleTable& t, std::string& out) {
  out += "*" + t.name() + "\n";
  const std::vector<const pb::RuleChain*> chains = SaveOrder(t);
  for (const pb::RuleChain* c : chains) {
    out += ":" + c->name() + " " +
           (c->base() ? Upper(c->policy().empty() ? "accept" : c->policy()) : "-") + "\n";
  }
  for (const pb::RuleChain* c : chains) {
    for (const auto& r : c->rules()) out += r.text() + "\n";
  }
  out += "COMMIT\n";
}

void RenderNftTable(const pb::RuleTable& t, std::string& out) {
  out += "table " + std::string(NftKeyword(t.family())) + " " + t.name() + " {\n";
  for (const pb::NftSet& s : t.sets()) {
    const bool map = !s.data_type().empty();
    out += std::string(map ? "\tmap " : "\tset ") + s.name() + " {\n\t\ttype " + s.type() +
           (map ? " : " + s.data_type() : "") + "\n";
    if (s.interval()) out += "\t\tflags interval\n";
    if (!s.comment().empty()) out += "\t\tcomment \"" + s.comment() + "\"\n";
    if (!s.elements().empty()) {
      out += "\t\telements = { ";
      for (int i = 0; i < s.elements_size(); ++i) out += (i ? ", " : "") + s.elements(i);
      out += " }\n";
    }
    out += "\t}\n";
  }
  for (const pb::RuleChain& c : t.chains()) {
    out += "\tchain " + c.name() + " {\n";
    if (c.base()) {
      out += "\t\ttype " + c.type() + " hook " + c.hook() + " priority " +
             std::to_string(c.priority()) + "; policy " +
             (c.policy().empty() ? "accept" : c.policy()) + ";\n";
    }
    for (const auto& r : c.rules()) out += "\t\t" + r.text() + "\n";
    out += "\t}\n";
  }
  out += "}\n";
}

// AmbientVariant::Describe of the proto's variant, or nullopt without one.
std::optional<std::string> VariantText(const pb::NetnsEntry& e) {
  if (!e.has_variant()) return std::nullopt;
  const pb::AmbientVariant& v = e.variant();
  AmbientVariant variant{
      .dns_capture = v.dns_capture(),
      .ingress_mode = v.ingress_mode(),
      .virtual_interfaces = {v.virtual_interfaces().begin(), v.virtual_interfaces().end()},
      .ipv6 = v.ipv6()};
  return variant.Describe();
}

template <typename Strings>
std::vector<std::string> Vector(const Strings& strings) {
  return {strings.begin(), strings.end()};
}

}  // namespace

std::string RenderRulesText(const pb::NetnsRules& rules) {
  const pb::NetnsEntry& ns = rules.netns();
  std::string out;
  out += "# netns " + ns.path() + " (inode " + std::to_string(ns.inode()) + ")" +
         (ns.host() ? " host" : "") + "\n";
  out += "# mode " + ns.mode();
  if (const auto variant = VariantText(ns)) out += ", variant " + *variant;
  out += "\n";
  for (const auto& e : ns.errors()) out += "# error: " + e.source() + ": " + e.message() + "\n";
  if (ns.unreadable()) return out;

  // Group: iptables backends (legacy, then nft) per family, then native nft tables.
  for (const std::string backend : {"iptables-legacy", "iptables-nft", "nft"}) {
    for (const std::string family : {"ipv4", "ipv6", "inet", "other"}) {
      bool header = false;
      for (const pb::RuleTable& t : rules.tables()) {
        if (t.backend() != backend || t.family() != family) continue;
        if (!header) {
          out += "\n# " + backend + " " + family + "\n";
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
  if (!rules.ipsets().empty()) {
    out += "\n# ipset\n";
    for (const pb::Ipset& s : rules.ipsets()) {
      out += "create " + s.name() + " " + s.type() + " family " +
             (s.family() == "ipv6" ? "inet6" : "inet") + "\n";
      for (const auto& m : s.members()) out += "add " + s.name() + " " + m + "\n";
    }
  }
  out += "\n# policy routing\n";
  for (const pb::PolicyRule& r : rules.policy_rules()) {
    char mark[64] = "";
    if (r.fwmark() || r.fwmask()) {
      std::snprintf(mark, sizeof(mark), " fwmark 0x%x/0x%x", r.fwmark(), r.fwmask());
    }
    out += std::string(r.family() == "ipv6" ? "ip -6 rule: " : "ip rule: ") +
           std::to_string(r.priority()) + ":" + mark + " " + r.action() + " " +
           std::to_string(r.table()) + "\n";
  }
  for (const pb::Route& r : rules.routes()) {
    out += std::string(r.family() == "ipv6" ? "ip -6 route: " : "ip route: ") + r.type() + " " +
           r.dst() + " dev " + r.dev() + " table " + std::to_string(r.table()) + "\n";
  }
  return out;
}

std::string RenderRulesJson(const pb::NetnsRules& rules) {
  const pb::NetnsEntry& ns = rules.netns();
  JsonWriter j;
  j.BeginObject();
  j.Field("schema", kRulesSchema);
  j.Key("netns").BeginObject();
  j.Field("path", ns.path());
  j.Field("inode", static_cast<uint64_t>(ns.inode()));
  j.Field("host", ns.host());
  j.EndObject();
  j.Field("mode", ns.mode());
  j.Key("variant");
  if (const auto variant = VariantText(ns)) {
    j.String(*variant);
  } else {
    j.Null();
  }
  j.Key("errors").BeginArray();
  for (const auto& e : ns.errors()) {
    j.BeginObject().Field("source", e.source()).Field("message", e.message()).EndObject();
  }
  j.EndArray();
  j.Key("tables").BeginArray();
  for (const pb::RuleTable& t : rules.tables()) {
    j.BeginObject();
    j.Field("backend", t.backend());
    j.Field("family", t.family());
    j.Field("name", t.name());
    j.Key("chains").BeginArray();
    for (const pb::RuleChain& ch : t.chains()) {
      j.BeginObject();
      j.Field("name", ch.name());
      j.Field("base", ch.base());
      if (ch.base()) {
        j.Field("hook", ch.hook()).Field("priority", static_cast<int64_t>(ch.priority()));
        j.Field("type", ch.type()).Field("policy", ch.policy());
      }
      j.Key("rules").BeginArray();
      for (const pb::RuleLine& r : ch.rules()) {
        j.BeginObject();
        j.Field("text", r.text());
        if (r.handle()) j.Field("handle", static_cast<uint64_t>(r.handle()));
        if (!r.comment().empty()) j.Field("comment", r.comment());
        j.Key("matches").BeginArray();
        for (const pb::RuleMatch& m : r.matches()) {
          j.BeginObject().Field("kind", m.kind()).Field("negated", m.negated());
          j.Field("value", m.value()).Field("value2", m.value2()).Field("text", m.text());
          if (!m.elements().empty()) j.StringArray("elements", Vector(m.elements()));
          j.EndObject();
        }
        j.EndArray();
        const pb::RuleAction& a = r.action();
        j.Key("action").BeginObject().Field("kind", a.kind());
        j.Field("value", a.value()).Field("value2", a.value2());
        j.Field("value3", a.value3()).Field("text", a.text());
        if (!a.elements().empty()) j.StringArray("elements", Vector(a.elements()));
        j.EndObject();
        j.EndObject();
      }
      j.EndArray();
      j.EndObject();
    }
    j.EndArray();
    j.Key("sets").BeginArray();
    for (const pb::NftSet& s : t.sets()) {
      j.BeginObject().Field("name", s.name()).Field("type", s.type());
      if (!s.data_type().empty()) j.Field("data_type", s.data_type());
      if (s.anonymous()) j.Field("anonymous", true);
      j.StringArray("elements", Vector(s.elements())).EndObject();
    }
    j.EndArray();
    j.EndObject();
  }
  j.EndArray();
  j.Key("ipsets").BeginArray();
  for (const pb::Ipset& s : rules.ipsets()) {
    j.BeginObject().Field("name", s.name()).Field("type", s.type());
    j.Field("family", s.family()).StringArray("members", Vector(s.members())).EndObject();
  }
  j.EndArray();
  j.Key("routing").BeginObject();
  j.Key("rules").BeginArray();
  for (const pb::PolicyRule& r : rules.policy_rules()) {
    j.BeginObject().Field("family", r.family()).Field("priority", r.priority());
    j.Field("fwmark", r.fwmark()).Field("fwmask", r.fwmask()).Field("table", r.table());
    j.Field("action", r.action()).EndObject();
  }
  j.EndArray();
  j.Key("routes").BeginArray();
  for (const pb::Route& r : rules.routes()) {
    j.BeginObject().Field("family", r.family()).Field("table", r.table());
    j.Field("type", r.type()).Field("dst", r.dst()).Field("dev", r.dev()).EndObject();
  }
  j.EndArray();
  j.Key("addresses").BeginArray();
  for (const pb::InterfaceAddress& a : rules.addresses()) {
    j.BeginObject().Field("ifname", a.ifname()).Field("family", a.family());
    j.Field("address", a.address()).Field("prefix_len", a.prefix_len());
    j.Field("global", a.global()).EndObject();
  }
  j.EndArray();
  j.Field("ipv6_disabled", rules.ipv6_disabled());
  j.EndObject();
  j.EndObject();
  return j.str();
}

}  // namespace ad::cli
