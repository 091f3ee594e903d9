// tools/check_setup_deps.py, the guard that tools/setup-debian.sh brings every Debian package this
// build read: it passes on this build, and it fails naming the package when one is dropped from
// a copy of the set-up. Its bench mode, on bench scripts written here, likewise.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "cgdp/core/error.hpp"
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"
#include "support/test_paths.hpp"

namespace cgdp {
namespace {

namespace fs = std::filesystem;

const std::string kCheck = cat(testing::source_dir(), "/tools/check_setup_deps.py");
const std::string kSetup = cat(testing::source_dir(), "/tools/setup-debian.sh");

testing::CommandResult check(const std::string& args) {
  return testing::run_command(cat(kCheck, " --build ", testing::binary_dir(), " ", args, " 2>&1"));
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file(const fs::path& path, const std::string& text, bool executable = false) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
  if (executable) ::chmod(path.c_str(), 0755);
}

// A copy of the set-up script with `package` taken out of its list.
fs::path setup_without(const testing::TempDir& dir, const std::string& package) {
  const std::string text = read_file(kSetup);
  const std::string edited = std::regex_replace(text, std::regex(" " + package + "(?=[ \n])"), "");
  EXPECT_NE(edited, text) << package << " is not in " << kSetup;
  const fs::path copy = dir / "setup-debian.sh";
  write_file(copy, edited);
  const auto listed = testing::run_command(cat("bash ", copy.string(), " --print-packages"));
  EXPECT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_EQ(listed.output.find(package + "\n"), std::string::npos) << listed.output;
  return copy;
}

TEST(SetupDeps, EveryPackageTheBuildReadIsBroughtByTheSetup) {
  const auto r = check("");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("check_setup_deps: ok: "), std::string::npos) << r.output;
  // The check saw the build: the libraries it links and the headers it includes.
  EXPECT_NE(check("--verbose").output.find("/usr/include/zmq.h\tlibzmq3-dev"), std::string::npos);
}

// Each of these is read by the build and brought by no other listed package: dropped from the
// set-up, the check must fail and name it. ocl-icd-opencl-dev is the one libdnnl-dev's CMake
// config needs but only recommends (a CMake cache entry); nlohmann-json3-dev is header-only
// (the compilers' dependency files); libhwloc-dev is linked through pkg-config; libcli11-dev is
// found by its CMake config. (libdnnl-dev's runtime package goes with it, a second line.)
class SetupDepsDropped : public ::testing::TestWithParam<const char*> {};

TEST_P(SetupDepsDropped, FailsNamingThePackage) {
  const std::string package = GetParam();
  testing::TempDir dir;
  const auto r = check(cat("--setup ", setup_without(dir, package).string()));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(cat("check_setup_deps: ", package, " is not brought by ")),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(cat("add ", package, " to ")), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("check_setup_deps: FAILED: "), std::string::npos) << r.output;
}

INSTANTIATE_TEST_SUITE_P(Packages, SetupDepsDropped,
                         ::testing::Values("ocl-icd-opencl-dev", "libdnnl-dev",
                                           "nlohmann-json3-dev", "libhwloc-dev", "libcli11-dev"));

// cppzmq-dev depends on libzmq3-dev, so apt brings it even when the list does not name it.
TEST(SetupDeps, APackageBroughtAsAHardDependencyNeedNotBeListed) {
  testing::TempDir dir;
  const auto r = check(cat("--setup ", setup_without(dir, "libzmq3-dev").string()));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(SetupDeps, AnUnknownPackageInTheSetupIsAnErrorNotAPass) {
  testing::TempDir dir;
  const fs::path setup = dir / "setup-debian.sh";
  write_file(setup, std::regex_replace(read_file(kSetup), std::regex(" cmake "),
                                       " cmake no-such-package-cgdp "));
  const auto r = check(cat("--setup ", setup.string()));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("apt-cache knows no package no-such-package-cgdp"), std::string::npos)
      << r.output;
}

// Bench mode, on a bench folder of its own: what a script runs and imports must come from the
// set-up its `Set-up:` line names; quoted text, comments and `command -v` run nothing.
class SetupDepsBench : public ::testing::Test {
 protected:
  testing::CommandResult check_bench(const fs::path& setup) {
    return testing::run_command(cat(kCheck, " --bench --bench-dir ", (dir_ / "bench").string(),
                                    " --setup ", setup.string(), " 2>&1"));
  }
  void script(const std::string& name, const std::string& text) {
    write_file(dir_ / "bench" / name, text, true);
  }
  testing::TempDir dir_;
};

TEST_F(SetupDepsBench, ProgramsAndModulesComeFromTheNamedSetup) {
  script("table.sh",
         "#!/usr/bin/env bash\n"
         "# Set-up: tools/setup-debian.sh\n"
         "# (jq in a comment runs nothing)\n"
         "set -euo pipefail\n"
         "command -v ccache >/dev/null && echo \"the chosen plan; gnuplot would draw it\"\n"
         "n=$(jq '.layers | length' \"$1\")\n"
         "echo \"$(awk '{print $1}' \"$2\") ${n}\" | python3 -c 'import json, sys'\n");
  script("peer.py",
         "#!/usr/bin/python3\n\"\"\"A peer. Set-up: tools/setup-debian.sh\"\"\"\nimport gzip\n");
  EXPECT_EQ(check_bench(kSetup).exit_code, 0) << check_bench(kSetup).output;

  const auto r = check_bench(setup_without(dir_, "jq"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("check_setup_deps: jq is not brought by tools/setup-debian.sh nor by "
                          "its packages' dependencies, yet "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("table.sh uses /usr/bin/jq (runs jq): add jq to tools/setup-debian.sh"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("FAILED: 1 problem(s) in 2 bench scripts"), std::string::npos)
      << r.output;
}

TEST_F(SetupDepsBench, AScriptThatNamesNoSetupOrImportsWhatNoneBringsIsNamed) {
  script("a.sh", "#!/usr/bin/env bash\necho hello\n");
  script("b.py",
         "#!/usr/bin/python3\n# Set-up: tools/setup-debian.sh\nimport no_such_module_cgdp\n");
  script("c.sh", "#!/usr/bin/env bash\n# Set-up: my laptop\n");
  script("d.sh", "#!/usr/bin/env bash\n# Set-up: the GPU machine\nnvidia-smi\n");
  const auto r = check_bench(kSetup);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("a.sh: no `Set-up:` line in its header"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("b.py: imports no_such_module_cgdp, which /usr/bin/python3 cannot find"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("c.sh: `Set-up: my laptop` names no set-up this check knows"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("d.sh"), std::string::npos) << r.output;  // not verifiable here
  EXPECT_NE(r.output.find("FAILED: 3 problem(s) in 4 bench scripts"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace cgdp
