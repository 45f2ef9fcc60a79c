// Runs docs/c-abi.md's example (example.cpp, which the smoke test copies from the page) on the package
// named on the command line, read into memory here as a loader would have mapped it.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

int gate_mapped(const uint8_t *config, size_t config_len, const uint8_t *weights, size_t weights_len);

static std::vector<uint8_t> slurp(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  std::vector<uint8_t> config = slurp(std::string(argv[1]) + "/config.json");
  std::vector<uint8_t> weights = slurp(std::string(argv[1]) + "/model.q4nx");
  return gate_mapped(config.data(), config.size(), weights.data(), weights.size());
}
