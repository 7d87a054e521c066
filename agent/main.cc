// ambient-doctor: CLI dispatch only.
#include "cli/cli.h"

int main(int argc, char** argv) { return ad::cli::Main(argc, argv); }
