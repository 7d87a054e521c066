// Small long-option parser: "--name value", "--name=value", "-o value", repeatable options and
// boolean switches. Every flag is declared with help text so `--help` documents all of them.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/result.h"

namespace ad::cli {

struct FlagSpec {
  std::string name;     // long name without dashes, e.g. "proc-root"
  char short_name = 0;  // e.g. 'o'
  bool takes_value = true;
  bool repeatable = false;
  std::string value_name;  // "PATH"
  std::string default_text;
  std::string help;
};

class FlagSet {
 public:
  FlagSet(std::string command, std::string synopsis, std::string description);
  void Add(FlagSpec spec);

  // Parses argv (without the program and command names). Returns an error message or nullopt.
  // Parsing again layers: a flag given in a later Parse replaces the values of earlier ones (a
  // repeatable flag keeps all values of the later call), so a flags file parsed first is
  // overridden by the command line parsed after it.
  std::optional<std::string> Parse(const std::vector<std::string>& args);
  // The same flag declarations, without parsed values.
  FlagSet EmptyCopy() const;

  bool Has(const std::string& name) const;
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  std::vector<std::string> GetAll(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // No command takes positional words: an error naming the ones given, nullopt when none was.
  std::optional<std::string> PositionalError() const;

  std::string Usage() const;

 private:
  const FlagSpec* Find(const std::string& name) const;
  const FlagSpec* FindShort(char c) const;

  std::string command_;
  std::string synopsis_;
  std::string description_;
  std::vector<FlagSpec> specs_;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
};

// Reads a flags file: one flag per line, "--name value", "--name=value" or "--name"; blank lines
// and lines starting with # are skipped; the value is the rest of the line (no quoting). Returns
// the words for FlagSet::Parse, or an error naming the file and line.
Result<std::vector<std::string>> ReadFlagsFile(const std::string& path);

}  // namespace ad::cli
