// Runs docs/c-abi.md's example (example.cpp, which the smoke test copies from the page) on the package
// named on the command line.
#include <string>

int gate_package(const std::string &dir);

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  return gate_package(argv[1]);
}
