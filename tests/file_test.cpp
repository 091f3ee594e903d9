// Atomic writes replace a file whole or not at all, and leave no temporary file behind.
#include "cgdp/io/file.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include "cgdp/core/error.hpp"
#include "support/temp_dir.hpp"

namespace cgdp {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TempDir;

TEST(AtomicWrite, WritesPiecesAndReplacesTheOldFile) {
  TempDir dir;
  const auto path = dir / "out.bin";
  write_file_atomically(path, {"ab", "", std::string_view("c\0d", 3)});
  EXPECT_EQ(read_file(path), std::string("abc\0d", 5));
  write_file_atomically(path, "x");
  EXPECT_EQ(read_file(path), "x");
  EXPECT_THAT(dir.entries(), ElementsAre("out.bin"));
}

// Lowers the file-size limit so write() fails with EFBIG, as on a full disk; restores it after.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);  // else the kernel kills the process
    getrlimit(RLIMIT_FSIZE, &old_);
    rlimit lowered = old_;
    lowered.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &lowered);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit old_{};
  void (*old_handler_)(int);
};

TEST(AtomicWrite, FailedWriteLeavesTheOldFileIntact) {
  TempDir dir;
  const auto path = dir / "model.ckpt";
  write_file_atomically(path, "old contents");
  try {
    FileSizeLimit limit(64);
    write_file_atomically(path, std::string(100000, 'n'));
    ADD_FAILURE() << "a write past the file-size limit succeeded";
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path.string() + ": write failed"));
  }
  EXPECT_EQ(read_file(path), "old contents");
  EXPECT_THAT(dir.entries(), ElementsAre("model.ckpt"));
}

// A target that is not a regular file is refused before the rename (which would replace a device
// or FIFO there, or fail on a directory), and the temporary file goes.
TEST(AtomicWrite, FailedRenameRemovesTheTemporaryFile) {
  TempDir dir;
  const auto path = dir / "taken";
  std::filesystem::create_directory(path);
  write_file_atomically(path / "inside", "keep");
  EXPECT_THAT([&] { write_file_atomically(path, "new"); },
              ::testing::ThrowsMessage<IoError>(
                  HasSubstr("taken: is a directory, not a regular file: nothing written")));
  EXPECT_THAT(dir.entries(), ElementsAre("taken"));
  EXPECT_EQ(read_file(path / "inside"), "keep");
}

TEST(AtomicWrite, MissingDirectoryIsReported) {
  TempDir dir;
  EXPECT_THAT([&] { write_file_atomically(dir / "no" / "such" / "file", "x"); },
              ::testing::ThrowsMessage<IoError>(HasSubstr("cannot create temporary file")));
}

TEST(ReadFile, MissingFileAndDirectoryAreReported) {
  TempDir dir;
  EXPECT_THAT([&] { read_file(dir / "absent"); },
              ::testing::ThrowsMessage<IoError>(HasSubstr("absent: no such file")));
  EXPECT_THAT([&] { read_file(dir.path()); },
              ::testing::ThrowsMessage<IoError>(HasSubstr("is a directory")));
}

TEST(CheckWritable, NamesTheUnwritablePath) {
  TempDir dir;
  testing::write_bytes(dir / "plain_file", "x");
  const std::vector<std::filesystem::path> bad = {"/nonexistent_dir/x.json",
                                                  dir / "plain_file" / "x.json", dir.path()};
  for (const auto& path : bad)
    EXPECT_THAT([&] { check_writable(path, "the timeline"); },
                ::testing::ThrowsMessage<IoError>(
                    HasSubstr(path.string() + ": cannot write the timeline (")));
  check_writable(dir / "ok.json", "the timeline");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"plain_file"});  // the probe is gone
}

TEST(CreateDirectories, NamesTheDirectoryItCannotCreate) {
  TempDir dir;
  testing::write_bytes(dir / "plain_file", "x");
  create_directories(dir / "a" / "b", "checkpoints");
  EXPECT_TRUE(std::filesystem::is_directory(dir / "a" / "b"));
  const auto bad = dir / "plain_file" / "ck";
  EXPECT_THAT([&] { create_directories(bad, "checkpoints"); },
              ::testing::ThrowsMessage<IoError>(
                  HasSubstr(bad.string() + ": cannot create the directory for checkpoints (")));
}

// A process that has exited and been waited for: its pid names no running writer.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

TEST(RemoveStaleTemporaries, RemovesOnlyThePrefixsFilesWhoseWriterIsGone) {
  TempDir dir;
  const std::string dead = std::to_string(dead_pid()), alive = std::to_string(::getpid());
  const std::vector<std::string> names = {
      "run_iter_5.ckpt.tmp." + dead, "run_iter_6.ckpt.tmp." + alive, "run_iter_7.ckpt",
      "other_iter_1.ckpt.tmp." + dead, "run_iter_8.ckpt.tmp.x" + dead};
  for (const std::string& name : names) testing::write_bytes(dir / name, "x");
  EXPECT_EQ(remove_stale_temporaries(dir.path(), "run_iter_"), 1);
  EXPECT_THAT(dir.entries(),
              ElementsAre("other_iter_1.ckpt.tmp." + dead, "run_iter_6.ckpt.tmp." + alive,
                          "run_iter_7.ckpt", "run_iter_8.ckpt.tmp.x" + dead));
}

}  // namespace
}  // namespace cgdp
