#include "cli/flags.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <fstream>

namespace ad::cli {

FlagSet::FlagSet(std::string command, std::string synopsis, std::string description)
    : command_(std::move(command)),
      synopsis_(std::move(synopsis)),
      description_(std::move(description)),
      app_(std::make_unique<CLI::App>(description_, command_)) {
  app_->set_help_flag();  // --help is a flag like the others (ours prints Usage())
  // Words that are not flags are collected, so that an error can name them; unknown flags are
  // left over (allow_extras) and reported by Parse.
  app_->add_option("words", positional_);
  app_->allow_extras();
  Add({.name = "help", .short_name = 'h', .help = "Show this help."}, &help_);
}

FlagSet::~FlagSet() = default;

void FlagSet::Add(FlagSpec spec, std::string* value) {
  std::string names = "--" + spec.name;
  if (spec.short_name != 0) names = std::string("-") + spec.short_name + "," + names;
  // The last of several wins, as a command line overriding itself.
  app_->add_option(names, *value)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  entries_.push_back({.spec = std::move(spec), .shown_default = *value});
}

void FlagSet::Add(FlagSpec spec, bool* value) {
  std::string names = "--" + spec.name;
  if (spec.short_name != 0) names = std::string("-") + spec.short_name + "," + names;
  app_->add_flag(names, *value);
  entries_.push_back({.spec = std::move(spec), .takes_value = false});
}

void FlagSet::Add(FlagSpec spec, std::vector<std::string>* values) {
  // One value per occurrence ("--netns-dir A --netns-dir B"), never the words after it.
  app_->add_option("--" + spec.name, *values)->allow_extra_args(false);
  std::string shown;
  for (const std::string& v : *values) shown += (shown.empty() ? "" : " and ") + v;
  entries_.push_back({.spec = std::move(spec), .repeatable = true, .shown_default = shown});
}

void FlagSet::Add(FlagSpec spec, int* value) {
  app_->add_option("--" + spec.name, *value)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  entries_.push_back({.spec = std::move(spec), .shown_default = std::to_string(*value)});
}

std::optional<std::string> FlagSet::Parse(const std::vector<std::string>& args) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes argv reversed
  try {
    app_->parse(reversed);
  } catch (const CLI::ArgumentMismatch& e) {
    std::string flag = e.what();
    flag = flag.substr(0, flag.find(':'));
    const auto entry = std::find_if(entries_.begin(), entries_.end(),
                                    [&](const Entry& x) { return "--" + x.spec.name == flag; });
    if (entry != entries_.end() && !entry->takes_value) return "flag " + flag + " takes no value";
    const std::string value_name = entry == entries_.end() || entry->spec.value_name.empty()
                                       ? std::string("VALUE")
                                       : entry->spec.value_name;
    return "flag " + flag + " needs a value (" + value_name + ")";
  } catch (const CLI::ConversionError& e) {
    // "Could not convert: --count = x": only the number flags convert.
    std::string what = e.what();
    what = what.substr(what.find(':') + 2);
    const size_t equals = what.find(" = ");
    if (equals == std::string::npos) return what;
    return "flag " + what.substr(0, equals) + " needs a number, not \"" + what.substr(equals + 3) +
           "\"";
  } catch (const CLI::ParseError& e) {
    return std::string(e.what()) + " (see: ambient-doctor " + command_ + " --help)";
  }
  for (const std::string& extra : app_->remaining()) {
    if (extra == "--") continue;
    std::string shown = extra.substr(0, extra.find('='));
    if (!extra.starts_with("--")) shown = extra.substr(0, 2);
    return "unknown flag " + shown + " (see: ambient-doctor " + command_ + " --help)";
  }
  return std::nullopt;
}

std::optional<bool> FlagSet::TakesValue(std::string_view flag) const {
  for (const Entry& e : entries_) {
    const bool long_form = flag.starts_with("--") && flag.substr(2) == e.spec.name;
    const bool short_form = e.spec.short_name != 0 && flag.size() == 2 && flag[0] == '-' &&
                            flag[1] == e.spec.short_name;
    if (long_form || short_form) return e.takes_value;
  }
  return std::nullopt;
}

bool FlagSet::Given(const std::string& name) const {
  const CLI::Option* option = app_->get_option_no_throw("--" + name);
  return option != nullptr && option->count() > 0;
}

std::optional<std::string> FlagSet::PositionalError() const {
  if (positional_.empty()) return std::nullopt;
  std::string words;
  for (const std::string& word : positional_) {
    words += (words.empty() ? "\"" : ", \"") + word + "\"";
  }
  return std::string(positional_.size() == 1 ? "unexpected argument " : "unexpected arguments ") +
         words + " (ambient-doctor " + command_ + " takes flags only; see --help)";
}

std::string FlagSet::Usage() const {
  std::string out = "Usage: ambient-doctor " + command_ + " " + synopsis_ + "\n\n" + description_ +
                    "\n\nFlags:\n";
  for (const Entry& e : entries_) {
    const FlagSpec& s = e.spec;
    std::string left = "  ";
    left += s.short_name ? std::string("-") + s.short_name + ", " : "    ";
    left += "--" + s.name;
    if (e.takes_value) left += " " + (s.value_name.empty() ? std::string("VALUE") : s.value_name);
    if (left.size() < 34) left.append(34 - left.size(), ' ');
    out += left + " " + s.help;
    const std::string& shown = s.default_text.empty() ? e.shown_default : s.default_text;
    if (!shown.empty()) out += " (default: " + shown + ")";
    if (e.repeatable) out += " [repeatable]";
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
