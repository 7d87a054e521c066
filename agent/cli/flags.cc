#include "cli/flags.h"

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <set>

namespace ad::cli {

FlagSet::FlagSet(std::string command, std::string synopsis, std::string description)
    : command_(std::move(command)),
      synopsis_(std::move(synopsis)),
      description_(std::move(description)) {
  Add({.name = "help", .short_name = 'h', .takes_value = false, .help = "Show this help."});
}

void FlagSet::Add(FlagSpec spec) { specs_.push_back(std::move(spec)); }

const FlagSpec* FlagSet::Find(const std::string& name) const {
  auto it =
      std::find_if(specs_.begin(), specs_.end(), [&](const auto& s) { return s.name == name; });
  return it == specs_.end() ? nullptr : &*it;
}

const FlagSpec* FlagSet::FindShort(char c) const {
  auto it =
      std::find_if(specs_.begin(), specs_.end(), [&](const auto& s) { return s.short_name == c; });
  return it == specs_.end() ? nullptr : &*it;
}

FlagSet FlagSet::EmptyCopy() const {
  FlagSet copy(command_, synopsis_, description_);
  copy.specs_ = specs_;
  return copy;
}

std::optional<std::string> FlagSet::Parse(const std::vector<std::string>& args) {
  std::set<std::string> given_here;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      positional_.insert(positional_.end(), args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    }
    const FlagSpec* spec = nullptr;
    std::optional<std::string> inline_value;
    std::string shown = arg;
    if (arg.rfind("--", 0) == 0) {
      std::string name = arg.substr(2);
      if (auto eq = name.find('='); eq != std::string::npos) {
        inline_value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
      spec = Find(name);
      shown = "--" + name;
    } else if (arg.size() >= 2 && arg[0] == '-' && arg[1] != '-') {
      spec = FindShort(arg[1]);
      if (arg.size() > 2) inline_value = arg.substr(2);
      shown = arg.substr(0, 2);
    } else {
      positional_.push_back(arg);
      continue;
    }
    if (spec == nullptr) {
      return "unknown flag " + shown + " (see: ambient-doctor " + command_ + " --help)";
    }
    std::string value = "true";
    if (spec->takes_value) {
      if (inline_value) {
        value = *inline_value;
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return "flag " + shown + " needs a value (" + spec->value_name + ")";
      }
    } else if (inline_value) {
      return "flag " + shown + " takes no value";
    }
    auto& slot = values_[spec->name];
    if (!spec->repeatable || given_here.insert(spec->name).second) slot.clear();
    slot.push_back(value);
  }
  return std::nullopt;
}

bool FlagSet::Has(const std::string& name) const { return values_.count(name) > 0; }

std::string FlagSet::Get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() || it->second.empty() ? fallback : it->second.back();
}

std::vector<std::string> FlagSet::GetAll(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

std::optional<std::string> FlagSet::PositionalError() const {
  if (positional_.empty()) return std::nullopt;
  std::string words;
  for (const std::string& word : positional_)
    words += (words.empty() ? "\"" : ", \"") + word + "\"";
  return std::string(positional_.size() == 1 ? "unexpected argument " : "unexpected arguments ") +
         words + " (ambient-doctor " + command_ + " takes flags only; see --help)";
}

std::string FlagSet::Usage() const {
  std::string out = "Usage: ambient-doctor " + command_ + " " + synopsis_ + "\n\n" + description_ +
                    "\n\nFlags:\n";
  for (const auto& s : specs_) {
    std::string left = "  ";
    left += s.short_name ? std::string("-") + s.short_name + ", " : "    ";
    left += "--" + s.name;
    if (s.takes_value) left += " " + (s.value_name.empty() ? std::string("VALUE") : s.value_name);
    if (left.size() < 34) left.append(34 - left.size(), ' ');
    out += left + " " + s.help;
    if (!s.default_text.empty()) out += " (default: " + s.default_text + ")";
    if (s.repeatable) out += " [repeatable]";
    out += "\n";
  }
  return out;
}

Result<std::vector<std::string>> ReadFlagsFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return ErrnoError(SourceKind::kNetns, "open(" + path + ")");
  std::vector<std::string> words;
  std::string line;
  size_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    const size_t last = line.find_last_not_of(" \t\r");
    line = line.substr(first, last - first + 1);
    if (!line.starts_with("-")) {
      return SourceError{SourceKind::kNetns,
                         path + ":" + std::to_string(line_number) + ": not a flag: " + line,
                         EINVAL};
    }
    const size_t space = line.find_first_of(" \t");
    // "--name=value with spaces" is one word; "--name value" two.
    if (space == std::string::npos || line.find('=') < space) {
      words.push_back(line);
      continue;
    }
    words.push_back(line.substr(0, space));
    words.push_back(line.substr(line.find_first_not_of(" \t", space)));
  }
  return words;
}

}  // namespace ad::cli
