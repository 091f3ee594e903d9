// A Caffe image database (LMDB, as convert_imageset writes it): read by key from many threads at
// once, or written in key order in batched transactions.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cgdp {

class LmdbReader {
 public:
  // Opens the database in folder `path` read-only (never creates it), checks its file
  // (check_lmdb_file) and lists its keys.
  explicit LmdbReader(const std::string& path);
  ~LmdbReader();
  LmdbReader(const LmdbReader&) = delete;
  LmdbReader& operator=(const LmdbReader&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<std::string>& keys() const { return keys_; }
  // The value of key `i`, copied out. Thread-safe.
  std::string value(size_t i) const;

 private:
  struct Env;
  std::string path_;
  std::unique_ptr<Env> env_;
  std::vector<std::string> keys_;
};

class LmdbWriter {
 public:
  // Creates the database in folder `path`, which must not exist yet (nothing is overwritten).
  explicit LmdbWriter(const std::string& path);
  ~LmdbWriter();
  LmdbWriter(const LmdbWriter&) = delete;
  LmdbWriter& operator=(const LmdbWriter&) = delete;

  void put(std::string_view key, std::string_view value);
  // Commits what is pending; the destructor commits too, but cannot report a failure.
  void commit();

 private:
  struct Env;
  std::string path_;
  std::unique_ptr<Env> env_;
  size_t pending_ = 0;
};

}  // namespace cgdp
