// The commands' flags: each flag is bound to a field of the command's plain configuration struct,
// whose initial value is the flag's default (written once, shown by --help). Parsed with CLI11:
// "--name value", "--name=value", "-o value", "-ojson", repeatable flags and switches. Every flag
// is declared with help text so `--help` documents all of them.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/result.h"

namespace CLI {
class App;
}  // namespace CLI

namespace ad::cli {

struct FlagSpec {
  std::string name;        // long name without dashes, e.g. "proc-root"
  char short_name = 0;     // e.g. 'o'
  std::string value_name;  // "PATH"
  // What --help says the default is, when the bound field's initial value does not say it well
  // (an empty field meaning "derived", a list); else the field's value is shown.
  std::string default_text;
  std::string help;
};

class FlagSet {
 public:
  FlagSet(std::string command, std::string synopsis, std::string description);
  ~FlagSet();
  // Bound by address (CLI11 holds pointers to the fields and to this object's own).
  FlagSet(const FlagSet&) = delete;
  FlagSet& operator=(const FlagSet&) = delete;

  // A flag with a value, a switch (bool: set when given), a repeatable flag (every value of one
  // command line; a later Parse that gives it replaces them) and a number. The field must
  // outlive the FlagSet; its value now is the default.
  void Add(FlagSpec spec, std::string* value);
  void Add(FlagSpec spec, bool* value);
  void Add(FlagSpec spec, std::vector<std::string>* values);
  void Add(FlagSpec spec, int* value);

  // Parses argv (without the program and command names) into the bound fields. Returns an error
  // message or nullopt. Parsing again layers: a flag given in a later Parse replaces what earlier
  // ones set, so a flags file parsed first is overridden by the command line parsed after it.
  std::optional<std::string> Parse(const std::vector<std::string>& args);

  // Whether the last Parse gave the flag (the command line, when it is parsed last).
  bool Given(const std::string& name) const;
  bool help() const { return help_; }
  // Whether "--name" (or "-x") is one of this set's flags, and whether it takes a value.
  std::optional<bool> TakesValue(std::string_view flag) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // No command takes positional words: an error naming the ones given, nullopt when none was.
  std::optional<std::string> PositionalError() const;

  std::string Usage() const;

 private:
  struct Entry {
    FlagSpec spec;
    bool takes_value = true;
    bool repeatable = false;
    std::string shown_default;
  };

  std::string command_;
  std::string synopsis_;
  std::string description_;
  std::unique_ptr<CLI::App> app_;
  std::vector<Entry> entries_;
  std::vector<std::string> positional_;
  bool help_ = false;
};

// Reads a flags file: one flag per line, "--name value", "--name=value" or "--name"; blank lines
// and lines starting with # are skipped; the value is the rest of the line (no quoting). Returns
// the words for FlagSet::Parse, or an error naming the file and line.
Result<std::vector<std::string>> ReadFlagsFile(const std::string& path);

}  // namespace ad::cli
