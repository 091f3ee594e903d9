// LMDB through its C API: read-only environments with one read transaction per lookup (MDB_NOTLS
// lets loader threads each hold one), writes committed every 1000 records as Caffe does. LMDB
// trusts its file, so the reader checks it first (lmdb_check.cpp).
#include "cgdp/data/image/lmdb_database.hpp"

#include <lmdb.h>

#include <filesystem>

#include "cgdp/core/error.hpp"
#include "cgdp/core/excerpt.hpp"
#include "data/image/lmdb_check.hpp"

namespace cgdp {

namespace {

constexpr size_t kRecordsPerCommit = 1000;
constexpr size_t kMapSize = size_t{1} << 40;  // address space only: LMDB grows the file as needed

void check(int rc, const std::string& path, const char* what) {
  if (rc == MDB_SUCCESS) return;
  const bool damaged = rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND || rc == MDB_BAD_VALSIZE ||
                       rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH;
  throw DataError(cat(path, ": LMDB cannot ", what, ": ", mdb_strerror(rc),
                      damaged ? " (the database is damaged: write or copy it again)" : ""));
}

struct Txn {
  MDB_txn* txn = nullptr;
  ~Txn() {
    if (txn) mdb_txn_abort(txn);
  }
};

}  // namespace

struct LmdbReader::Env {
  MDB_env* env = nullptr;
  MDB_dbi dbi = 0;
  ~Env() {
    if (env) mdb_env_close(env);
  }
};

LmdbReader::LmdbReader(const std::string& path) : path_(path), env_(std::make_unique<Env>()) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec))
    throw DataError(cat(path, ": no such LMDB folder (a database is never created by reading)"));
  if (!std::filesystem::exists(std::filesystem::path(path) / "data.mdb", ec))
    throw DataError(cat(path, ": no data.mdb: not an LMDB database folder"));
  check_lmdb_file((std::filesystem::path(path) / "data.mdb").string());
  check(mdb_env_create(&env_->env), path, "start");
  check(mdb_env_set_mapsize(env_->env, kMapSize), path, "map the database");
  check(mdb_env_open(env_->env, path.c_str(), MDB_RDONLY | MDB_NOTLS | MDB_NOLOCK, 0664), path,
        "open the database");
  Txn t;
  check(mdb_txn_begin(env_->env, nullptr, MDB_RDONLY, &t.txn), path, "begin a read");
  check(mdb_dbi_open(t.txn, nullptr, 0, &env_->dbi), path, "open the main table");
  MDB_cursor* cursor = nullptr;
  check(mdb_cursor_open(t.txn, env_->dbi, &cursor), path, "walk the keys");
  MDB_val key, value;
  int rc;
  while ((rc = mdb_cursor_get(cursor, &key, &value, keys_.empty() ? MDB_FIRST : MDB_NEXT)) == MDB_SUCCESS)
    keys_.emplace_back(static_cast<const char*>(key.mv_data), key.mv_size);
  mdb_cursor_close(cursor);
  if (rc != MDB_NOTFOUND) check(rc, path, "walk the keys");
  if (keys_.empty()) throw DataError(cat(path, ": the LMDB database has no records"));
}

LmdbReader::~LmdbReader() = default;

std::string LmdbReader::value(size_t i) const {
  Txn t;
  check(mdb_txn_begin(env_->env, nullptr, MDB_RDONLY, &t.txn), path_, "begin a read");
  MDB_val key{keys_.at(i).size(), const_cast<char*>(keys_[i].data())}, value;
  check(mdb_get(t.txn, env_->dbi, &key, &value), path_,
        cat("read key '", excerpt(keys_[i]), "'").c_str());
  return std::string(static_cast<const char*>(value.mv_data), value.mv_size);
}

struct LmdbWriter::Env {
  MDB_env* env = nullptr;
  MDB_dbi dbi = 0;
  MDB_txn* txn = nullptr;
  ~Env() {
    if (txn) mdb_txn_abort(txn);
    if (env) mdb_env_close(env);
  }
};

LmdbWriter::LmdbWriter(const std::string& path) : path_(path), env_(std::make_unique<Env>()) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec))
    throw UsageError(cat(path, ": already exists; give a new folder for the database"));
  if (!std::filesystem::create_directories(path, ec))
    throw IoError(cat(path, ": cannot create the database folder (", ec.message(), ")"));
  check(mdb_env_create(&env_->env), path, "start");
  check(mdb_env_set_mapsize(env_->env, kMapSize), path, "map the database");
  check(mdb_env_open(env_->env, path.c_str(), 0, 0664), path, "create the database");
}

LmdbWriter::~LmdbWriter() {
  try {
    commit();
  } catch (...) {  // a failure here was reported by an explicit commit() if the caller cared
  }
}

void LmdbWriter::put(std::string_view key, std::string_view value) {
  if (!env_->txn) {
    check(mdb_txn_begin(env_->env, nullptr, 0, &env_->txn), path_, "begin a write");
    check(mdb_dbi_open(env_->txn, nullptr, 0, &env_->dbi), path_, "open the main table");
  }
  MDB_val k{key.size(), const_cast<char*>(key.data())};
  MDB_val v{value.size(), const_cast<char*>(value.data())};
  check(mdb_put(env_->txn, env_->dbi, &k, &v, 0), path_, "write a record");
  if (++pending_ >= kRecordsPerCommit) commit();
}

void LmdbWriter::commit() {
  if (!env_->txn) return;
  MDB_txn* txn = env_->txn;
  env_->txn = nullptr;
  pending_ = 0;
  check(mdb_txn_commit(txn), path_, "commit");
}

}  // namespace cgdp
