// The shared secret every host and shard of a cluster presents before anything else is accepted.
#pragma once

#include <string>

namespace cgdp {

inline constexpr const char* kClusterTokenEnv = "CGDP_CLUSTER_TOKEN";

// Reads the cluster token from `token_file` when it is not empty (trailing whitespace and newlines
// are dropped; the file must not be readable by group or others), else from the environment
// variable `env_var`. Throws UsageError naming the file or variable when there is no token, it is
// shorter than 16 or longer than 255 bytes (ZeroMQ's PLAIN limit) or holds a NUL byte; IoError
// when the file cannot be read.
std::string load_cluster_token(const std::string& token_file,
                               const char* env_var = kClusterTokenEnv);

// Creates `path` with a new random token (64 hex characters), owner-only (mode 600), whole or not
// at all (written beside it, then renamed): rank 0 makes it on a shared file system for a job's
// ranks. Returns false, creating nothing, when `path` exists. IoError names the path on failure.
bool create_cluster_token_file(const std::string& path);

}  // namespace cgdp
