// A loader-shaped program: maps a package's config.json and weight file, asks the gate in process
// whether it may load them (gating the very bytes it mapped), prints the verdict and the first
// objection, and exits with the gate's status (0 pass, 1 fail, 2 could not run, 3 undecided).
//
//   loader [--by-path] [--free-twice] [--leak] DIR
//
// --by-path gates the directory instead (the library opens it); --free-twice frees the report a second
// time and requires that to be refused; --leak does not free the report (the ASan row must see it).
#include "dflash_gate.h"

#include <cstdio>
#include <cstring>
#include <string>

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace {

// A read-only map of a whole file; empty when the file cannot be opened.
struct Mapped {
  const uint8_t *data = nullptr;
  size_t len = 0;
  bool opened = false;
  explicit Mapped(const std::string &path) {
    int fd = open(path.c_str(), O_RDONLY);
    if (fd < 0) return;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
      opened = true;
      len = static_cast<size_t>(st.st_size);
      if (len > 0) {
        void *p = mmap(nullptr, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
          opened = false;
          len = 0;
        } else {
          data = static_cast<const uint8_t *>(p);
        }
      }
    }
    close(fd);
  }
  ~Mapped() {
    if (data) munmap(const_cast<uint8_t *>(data), len);
  }
  Mapped(const Mapped &) = delete;
  Mapped &operator=(const Mapped &) = delete;
  // Whether the file is there is `opened`, the library's has_config / has_weights; an empty file's
  // null data with length 0 is an empty buffer.
  const uint8_t *bytes() const { return data; }
};

// The package's one weight file: the entry ending in .q4nx, or "" when there is none.
std::string weight_name(const std::string &dir) {
  std::string found;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d)) {
      std::string name = e->d_name;
      if (name.size() > 5 && name.compare(name.size() - 5, 5, ".q4nx") == 0) found = name;
    }
    closedir(d);
  }
  return found;
}

void print(const char *label, dflash_gate_str s) {
  std::printf("%s%.*s\n", label, static_cast<int>(s.len), s.ptr);
}

}  // namespace

int main(int argc, char **argv) {
  bool by_path = false, free_twice = false, leak = false;
  std::string dir;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--by-path") == 0) by_path = true;
    else if (std::strcmp(argv[i], "--free-twice") == 0) free_twice = true;
    else if (std::strcmp(argv[i], "--leak") == 0) leak = true;
    else dir = argv[i];
  }
  if (dir.empty()) {
    std::fprintf(stderr, "usage: loader [--by-path] [--free-twice] [--leak] DIR\n");
    return 2;
  }

  dflash_gate_report *report = nullptr;
  dflash_gate_status status;
  if (by_path) {
    status = dflash_gate_gate(dir.data(), dir.size(), nullptr, &report);
  } else {
    Mapped config(dir + "/config.json");
    std::string name = weight_name(dir);
    Mapped weights(dir + "/" + (name.empty() ? std::string("model.q4nx") : name));
    if (name.empty()) name = "model.q4nx";
    status = dflash_gate_evaluate(dir.data(), dir.size(), config.opened, config.bytes(), config.len,
                                  name.data(), name.size(), weights.opened, weights.bytes(), weights.len,
                                  &report);
  }
  if (status != DFLASH_GATE_OK) {
    std::fprintf(stderr, "loader: the gate did not answer (status %d)\n", static_cast<int>(status));
    return 2;
  }

  dflash_gate_verdict verdict;
  if (dflash_gate_report_verdict(report, &verdict) != DFLASH_GATE_OK) return 2;
  const char *labels[] = {"PASS", "FAIL", "COULD NOT RUN", "UNDECIDED"};
  std::printf("verdict %s\n", labels[verdict]);
  dflash_gate_check objection;
  if (dflash_gate_report_first_objection(report, &objection) == DFLASH_GATE_OK) {
    print("objection ", objection.id);
    print("  ", objection.message);
  }
  size_t tensors = 0;
  dflash_gate_report_tensor_count(report, &tensors);
  std::printf("tensors %zu\n", tensors);
  int code = dflash_gate_report_exit_status(report);

  if (leak) return code;
  if (dflash_gate_report_free(report) != DFLASH_GATE_OK) return 4;
  if (free_twice) {
    if (dflash_gate_report_free(report) != DFLASH_GATE_INVALID_HANDLE) return 5;
    // Read after free is refused too, not read.
    size_t n = 0;
    if (dflash_gate_report_check_count(report, &n) != DFLASH_GATE_INVALID_HANDLE) return 6;
    std::printf("second free refused\n");
  }
  return code;
}
