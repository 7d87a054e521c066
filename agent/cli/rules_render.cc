#include "cli/rules_render.h"

#include <algorithm>
#include <cstdio>
#include <string_view>
#include <vector>

#include "ambientdoctor/v1/documents.pb.h"
#include "api/report_proto.h"
#include "model/finding.h"

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

// rules/v1 prints a chain's hook, priority, type and policy for base chains only, a rule's handle
// only when it has one (nft) and its comment when not empty, a set's data_type for maps only: the
// fields' presence, set here whatever the sender (BuildNetnsRules, or a daemon of another version)
// did.
void NormalisePresence(pb::RuleTable& table) {
  for (pb::RuleChain& chain : *table.mutable_chains()) {
    if (chain.base()) {
      chain.set_hook(chain.hook());
      chain.set_priority(chain.priority());
      chain.set_type(chain.type());
      chain.set_policy(chain.policy());
    } else {
      chain.clear_hook();
      chain.clear_priority();
      chain.clear_type();
      chain.clear_policy();
    }
    for (pb::RuleLine& rule : *chain.mutable_rules()) {
      if (rule.handle() == 0) rule.clear_handle();
      if (rule.comment().empty()) rule.clear_comment();
    }
  }
  for (pb::NftSet& set : *table.mutable_sets()) {
    if (set.data_type().empty()) set.clear_data_type();
  }
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
  pb::RulesDocument doc;
  doc.set_schema(kRulesSchema);
  doc.mutable_netns()->set_path(ns.path());
  doc.mutable_netns()->set_inode(ns.inode());
  doc.mutable_netns()->set_host(ns.host());
  doc.set_mode(ns.mode());
  if (const auto variant = VariantText(ns)) {
    doc.mutable_variant()->set_string_value(*variant);
  } else {
    doc.mutable_variant()->set_null_value(google::protobuf::NULL_VALUE);
  }
  *doc.mutable_errors() = ns.errors();
  *doc.mutable_tables() = rules.tables();
  for (pb::RuleTable& t : *doc.mutable_tables()) NormalisePresence(t);
  *doc.mutable_ipsets() = rules.ipsets();
  pb::RulesRouting* routing = doc.mutable_routing();
  *routing->mutable_rules() = rules.policy_rules();
  *routing->mutable_routes() = rules.routes();
  *routing->mutable_addresses() = rules.addresses();
  routing->set_ipv6_disabled(rules.ipv6_disabled());
  std::string json = api::ToJson(doc);
  // One newline at the end, as rules/v1 always had (the printer ends in one, ToJson adds one).
  while (json.size() >= 2 && json[json.size() - 2] == '\n') json.pop_back();
  return json;
}

}  // namespace ad::cli
