// A rank that `cgdp launch` started on this machine ends with its launcher, even one killed with
// SIGKILL: the launcher passes its pid, and the rank asks the kernel for SIGTERM when its parent
// dies. Remote ranks stop through the shards' heartbeat once rank 0 (here) is gone.
#pragma once

namespace cgdp::cli {

inline constexpr const char* kLauncherPidEnv = "CGDP_LAUNCHER_PID";

// In a rank: when CGDP_LAUNCHER_PID is set, arranges SIGTERM on the parent's death; throws
// RuntimeCheckError when the launcher is already gone (it died before the arrangement).
void end_with_launcher();

}  // namespace cgdp::cli
