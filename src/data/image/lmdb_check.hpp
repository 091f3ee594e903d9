// A check of an LMDB data file before liblmdb maps it.
#pragma once

#include <string>

namespace cgdp {

// Reads `data_mdb`'s meta pages and walks its B-tree with pread: DataError naming the file and the
// first damage (a truncated file, a page or record outside it, a loop) instead of the SIGBUS or
// SIGSEGV liblmdb would meet. Values are not read, only checked to lie in the file.
void check_lmdb_file(const std::string& data_mdb);

}  // namespace cgdp
