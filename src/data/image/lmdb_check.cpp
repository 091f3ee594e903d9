// LMDB's on-disk B-tree (format version 1, liblmdb 0.9, 64-bit), checked page by page with pread
// before LMDB maps it: LMDB trusts its file, and one damaged page sends its reads anywhere
// (SIGSEGV) or past the end of the file (SIGBUS).
#include "data/image/lmdb_check.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "cgdp/core/error.hpp"

namespace cgdp {

namespace {

// From liblmdb's mdb.c: the page header, node and meta layouts.
constexpr uint32_t kMagic = 0xBEEFC0DE;
constexpr uint32_t kDataVersion = 1;
constexpr size_t kPageHeader =
    16;                            // mp_pgno (8), mp_pad (2), mp_flags (2), lower and upper (2 + 2)
constexpr size_t kNodeHeader = 8;  // mn_lo, mn_hi, mn_flags, mn_ksize
constexpr uint16_t kBranch = 0x01, kLeaf = 0x02, kMeta = 0x08;
constexpr uint16_t kBigData = 0x01, kSubData = 0x02, kDupData = 0x04;
constexpr uint16_t kDupSort = 0x04;  // a database flag
constexpr uint64_t kNoRoot = ~uint64_t{0};
constexpr size_t kMainDb = 40 + 48;    // mm_dbs[1], after magic, version, address and map size
constexpr size_t kLastPage = 40 + 96;  // mm_last_pg, after both databases
constexpr int kMaxDepth = 64;

template <typename T>
T at(const std::vector<uint8_t>& page, size_t offset) {
  T value;
  std::memcpy(&value, page.data() + offset, sizeof value);
  return value;
}

struct Meta {
  uint64_t psize = 0, last_page = 0, txnid = 0, root = kNoRoot;
  uint16_t flags = 0, depth = 0;
};

class FileChecker {
 public:
  explicit FileChecker(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw IoError(cat(path, ": cannot open: ", std::strerror(errno)));
    struct stat st;
    if (::fstat(fd_, &st) != 0) throw IoError(cat(path, ": cannot stat: ", std::strerror(errno)));
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~FileChecker() { ::close(fd_); }

  void check() {
    const Meta meta = newest_meta();
    if (meta.root == kNoRoot) return;  // no records: the reader says so
    if (meta.flags & kDupSort) damaged("a database with duplicate keys (Caffe's have none)");
    std::vector<bool> seen(meta.last_page + 1, false);
    std::vector<std::pair<uint64_t, int>> todo = {{meta.root, 1}};
    while (!todo.empty()) {
      const auto [pgno, depth] = todo.back();
      todo.pop_back();
      if (pgno < 2 || pgno > meta.last_page)
        damaged(cat("a page number ", pgno, " past its last page ", meta.last_page));
      if (seen[pgno]) damaged(cat("page ", pgno, " is reached twice"));
      seen[pgno] = true;
      if (depth > std::min<int>(meta.depth, kMaxDepth))
        damaged(cat("page ", pgno, " is deeper than the tree"));
      check_page(read(pgno, psize_), pgno, depth, meta, todo);
    }
  }

 private:
  [[noreturn]] void damaged(const std::string& what) const {
    throw DataError(cat(path_, ": damaged: ", what, " (write or copy the database again)"));
  }

  std::vector<uint8_t> read(uint64_t pgno, uint64_t bytes) const {
    std::vector<uint8_t> page(bytes);
    const ssize_t got = ::pread(fd_, page.data(), bytes, static_cast<off_t>(pgno * psize_));
    if (got != static_cast<ssize_t>(bytes))
      damaged(cat("page ", pgno, " is past the end of the file"));
    return page;
  }

  // Both meta pages are checked as LMDB reads them; the one with the newer transaction wins.
  Meta newest_meta() {
    if (size_ < 2 * 512)
      throw DataError(cat(path_, ": ", size_, " bytes: too short for an LMDB file"));
    psize_ = 512;  // enough to read the first meta's page size
    const auto first = read(0, psize_);
    if (at<uint32_t>(first, kPageHeader) != kMagic)
      throw DataError(cat(path_, ": not an LMDB file (no LMDB meta page at its start)"));
    const uint64_t psize = at<uint32_t>(first, 40);  // mm_dbs[0].md_pad holds the page size
    if (psize < 512 || psize > 65536 || (psize & (psize - 1)))
      damaged(cat("a page size of ", psize, " bytes"));
    psize_ = psize;
    Meta best;
    for (uint64_t m = 0; m < 2; ++m) {
      const auto page = read(m, psize_);
      if (at<uint32_t>(page, kPageHeader) != kMagic ||
          at<uint32_t>(page, kPageHeader + 4) != kDataVersion || !(at<uint16_t>(page, 10) & kMeta))
        continue;
      Meta meta{psize_,
                at<uint64_t>(page, kLastPage),
                at<uint64_t>(page, kLastPage + 8),
                at<uint64_t>(page, kMainDb + 40),
                at<uint16_t>(page, kMainDb + 4),
                at<uint16_t>(page, kMainDb + 6)};
      if (best.psize == 0 || meta.txnid > best.txnid) best = meta;
    }
    if (best.psize == 0) damaged("neither meta page is valid");
    if (best.last_page >= size_ / psize_)  // also a last page of 2^64 - 1, whose + 1 wraps
      throw DataError(cat(path_, ": truncated or damaged: its meta page names ", best.last_page + 1,
                          " pages of ", psize_, " bytes, the file holds ", size_,
                          " bytes (write or copy the database again)"));
    return best;
  }

  void check_page(const std::vector<uint8_t>& page, uint64_t pgno, int depth, const Meta& meta,
                  std::vector<std::pair<uint64_t, int>>& todo) const {
    const uint16_t flags = at<uint16_t>(page, 10), lower = at<uint16_t>(page, 12),
                   upper = at<uint16_t>(page, 14);
    const bool branch = flags == kBranch, leaf = flags == kLeaf;
    if (at<uint64_t>(page, 0) != pgno || !(branch || leaf))
      damaged(cat("page ", pgno, " is not the branch or leaf page its parent names"));
    if (lower < kPageHeader || lower > upper || upper > psize_ || (lower - kPageHeader) % 2)
      damaged(cat("page ", pgno, "'s free space [", lower, ", ", upper, ") is not in the page"));
    for (size_t i = 0; i < (lower - kPageHeader) / 2u; ++i) {
      const size_t node = at<uint16_t>(page, kPageHeader + 2 * i);
      if (node < upper || node + kNodeHeader > psize_)
        damaged(cat("page ", pgno, "'s node ", i, " is outside it"));
      const uint64_t lo = at<uint16_t>(page, node), hi = at<uint16_t>(page, node + 2);
      const uint16_t node_flags = at<uint16_t>(page, node + 4);
      const size_t key_end = node + kNodeHeader + at<uint16_t>(page, node + 6);
      if (key_end > psize_) damaged(cat("page ", pgno, "'s key ", i, " runs past it"));
      if (branch) {
        todo.push_back({lo | hi << 16 | uint64_t{node_flags} << 32, depth + 1});
        continue;
      }
      if (node_flags & (kSubData | kDupData))
        damaged(cat("page ", pgno, "'s record ", i, " has duplicates"));
      const uint64_t data_size = lo | hi << 16;
      if (!(node_flags & kBigData)) {
        if (key_end + data_size > psize_)
          damaged(cat("page ", pgno, "'s record ", i, " runs past it"));
        continue;
      }
      if (key_end + sizeof(uint64_t) > psize_)
        damaged(cat("page ", pgno, "'s record ", i, " runs past it"));
      // The value's first page and its length must lie in the file; its pages are read by the
      // value.
      const uint64_t first = at<uint64_t>(page, key_end);
      if (first < 2 || first > meta.last_page ||
          data_size > (meta.last_page + 1 - first) * psize_ - kPageHeader)
        damaged(cat("page ", pgno, "'s record ", i, " points past the file's last page"));
    }
  }

  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0, psize_ = 0;
};

}  // namespace

void check_lmdb_file(const std::string& data_mdb) {
  FileChecker(data_mdb).check();
}

}  // namespace cgdp
