// The digits dataset from its gzip CSV.
#include <zlib.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>

#include "smelt/creation.h"
#include "smelt/data.h"

namespace smelt::data {

namespace {

constexpr int64_t kPixels = 64;
constexpr int64_t kMaxPixel = 16;
constexpr int64_t kClasses = 10;

// The whole decompressed file; errors name the file and zlib's reason.
std::string read_gzip(const std::string& path) {
  errno = 0;
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), gzclose);
  SMELT_CHECK(file != nullptr) << "load_digits: " << path << ": cannot open: "
                               << (errno ? std::strerror(errno) : "out of memory");
  std::string out;
  char buffer[1 << 16];
  while (true) {
    int n = gzread(file.get(), buffer, sizeof(buffer));
    // A stream cut short reads as a plain end of file; gzerror tells the two apart.
    int code = Z_OK;
    const char* message = n <= 0 ? gzerror(file.get(), &code) : "";
    SMELT_CHECK(n >= 0 && code == Z_OK)
        << "load_digits: " << path << ": cannot decompress: "
        << (code == Z_BUF_ERROR ? "the gzip stream is truncated" : message);
    if (n == 0) break;
    out.append(buffer, size_t(n));
  }
  return out;
}

}  // namespace

std::string default_data_dir() { return SMELT_DATA_DIR; }

std::shared_ptr<TensorDataset> load_digits(const std::string& path) {
  const std::string text = read_gzip(path);
  std::vector<float> pixels;
  std::vector<int64_t> labels;
  size_t pos = 0;
  int64_t line_number = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string_view line(text.data() + pos, eol - pos);
    pos = eol + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;

    int64_t field = 0;
    const char* p = line.data();
    const char* end = line.data() + line.size();
    while (true) {
      int64_t value = 0;
      auto [next, ec] = std::from_chars(p, end, value);
      SMELT_CHECK(ec == std::errc() && (next == end || *next == ','))
          << "load_digits: " << path << ": line " << line_number << ", field " << field + 1
          << ": expected an integer";
      const bool is_label = field == kPixels;
      SMELT_CHECK(field <= kPixels) << "load_digits: " << path << ": line " << line_number
                                    << " has more than " << kPixels + 1 << " fields";
      SMELT_CHECK(is_label ? (value >= 0 && value < kClasses) : (value >= 0 && value <= kMaxPixel))
          << "load_digits: " << path << ": line " << line_number << ", field " << field + 1 << ": "
          << value << " is out of range (pixels are 0.." << kMaxPixel << ", labels 0.."
          << kClasses - 1 << ")";
      if (is_label)
        labels.push_back(value);
      else
        pixels.push_back(float(value));
      ++field;
      if (next == end) break;
      p = next + 1;
    }
    SMELT_CHECK(field == kPixels + 1)
        << "load_digits: " << path << ": line " << line_number << " has " << field
        << " fields, expected " << kPixels + 1 << " (64 pixels and a label)";
  }
  SMELT_CHECK(!labels.empty()) << "load_digits: " << path << ": no rows";
  const int64_t n = int64_t(labels.size());
  return std::make_shared<TensorDataset>(from_vector(pixels, {n, kPixels}),
                                         from_vector(labels, {n}));
}

}  // namespace smelt::data
