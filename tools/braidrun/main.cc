// braidrun: starts N local ranks of a command with torchrun-style variables and a job secret.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "common/error.h"
#include "tools/braidrun/launcher.h"
#include "tools/braidrun/options.h"

int main(int argc, char** argv) {
  using braid::braidrun::usageText;
  braid::braidrun::LaunchOptions options;
  try {
    options = braid::braidrun::parseArguments(argc, argv);
  } catch (const braid::braidrun::UsageError& e) {
    std::string text = std::string("braidrun: ") + e.what() + "\n" + usageText();
    std::fputs(text.c_str(), stderr);
    return 2;
  }
  if (options.help) {
    std::fputs(usageText().c_str(), stdout);
    return 0;
  }
  try {
    return braid::braidrun::launch(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "braidrun: %s\n", e.what());
    return 1;
  }
}
