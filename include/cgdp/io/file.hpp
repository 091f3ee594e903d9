// Whole-file reads and crash-safe whole-file writes.
#pragma once

#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>

namespace cgdp {

// Where rank r of a multi-host job writes a file the job names once: rank 0 at `path`, rank r > 0
// beside it (run.json -> run.rank1.json), so ranks sharing a file system do not overwrite it.
std::string rank_file_path(const std::string& path, int rank);

// The file's bytes; throws IoError naming the file when it is missing or unreadable, or not a
// regular file (a FIFO would block the read forever).
std::string read_file(const std::filesystem::path& path);
// The same into `bytes`, whose capacity is kept: a loader thread reads file after file into one.
void read_file(const std::filesystem::path& path, std::string& bytes);

// Throws IoError naming `path` when it exists and is not a regular file (a FIFO, a device, a
// socket, a directory), before a reader opens it: opening a FIFO blocks until a writer comes.
void check_regular_input(const std::filesystem::path& path);

// Writes `pieces`, concatenated, to `path` so that a reader (or a crash) sees either the old file
// or the complete new one: the bytes go to `path.tmp.<pid>` in the same directory, are fsynced,
// renamed over `path`, and the directory is fsynced. On failure the temporary file is removed,
// the previous file is left as it was, and IoError names `path` and the failing step.
void write_file_atomically(const std::filesystem::path& path,
                           std::initializer_list<std::string_view> pieces);
inline void write_file_atomically(const std::filesystem::path& path, std::string_view bytes) {
  write_file_atomically(path, {bytes});
}

// Checks before a run that `path` can be written, by creating and removing a probe file in its
// directory, and that it is not a directory, device, FIFO or socket (an output is replaced whole
// through a rename), so a bad path fails at start, not after the training; throws
// IoError("PATH: cannot write WHAT (REASON)") otherwise.
void check_writable(const std::filesystem::path& path, std::string_view what);

// Whether two paths name one file: the same file when both exist (hard and symbolic links
// included), else the same path once `.`, `..` and symbolic links in it are resolved.
bool same_file(const std::filesystem::path& a, const std::filesystem::path& b);

// Creates `dir` (and its parents) when missing; throws IoError naming it and why not.
void create_directories(const std::filesystem::path& dir, std::string_view what);

// Removes the `<file>.tmp.<pid>` files that write_file_atomically left, for files of `dir` whose
// names start with `stem`, when process <pid> is gone (a kill -9 mid-write). Returns how many.
int remove_stale_temporaries(const std::filesystem::path& dir, std::string_view stem);

}  // namespace cgdp
