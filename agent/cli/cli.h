// Command-line entry: subcommand dispatch (report, rules, version, help).
#pragma once

namespace ad::cli {

int Main(int argc, char** argv);

}  // namespace ad::cli
