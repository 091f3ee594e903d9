// prctl(PR_SET_PDEATHSIG) for ranks that `cgdp launch` started here.
#include "cli/launcher_link.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "cgdp/core/error.hpp"

namespace cgdp::cli {

void end_with_launcher() {
  const char* text = std::getenv(kLauncherPidEnv);
  if (text == nullptr || *text == '\0') return;
  const long launcher = std::strtol(text, nullptr, 10);
  if (::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0)
    throw RuntimeCheckError("cannot ask to end with the launcher (prctl PR_SET_PDEATHSIG)");
  // The launcher may have died before the request: then this rank was already given to another
  // parent, and no signal will come.
  if (::getppid() != launcher)
    throw RuntimeCheckError(cat("the launcher (pid ", launcher, ") is gone; not training"));
}

}  // namespace cgdp::cli
