// Range checks for numeric flags with a short message ("--batch: must be > 0, got 0"); CLI11's
// PositiveNumber prints the whole range of a double.
#pragma once

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include "cgdp/core/error.hpp"
#include "cgdp/data/image/image.hpp"

namespace cgdp::cli {

inline CLI::Validator number_check(bool allow_zero) {
  return CLI::Validator(
      [allow_zero](std::string& text) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(text, value)) return "expected a number, got '" + text + "'";
        if (value > 0 || (allow_zero && value == 0)) return {};
        return std::string(allow_zero ? "must be >= 0" : "must be > 0") + ", got " + text;
      },
      allow_zero ? ">= 0" : "> 0", allow_zero ? "NONNEGATIVE" : "POSITIVE");
}

inline const CLI::Validator kPositive = number_check(false);
inline const CLI::Validator kNonNegative = number_check(true);

// A number that is not NaN or infinite ("--pixel-scale: expected a finite number, got nan").
inline const CLI::Validator kFinite = CLI::Validator(
    [](std::string& text) -> std::string {
      double value = 0;
      if (!CLI::detail::lexical_cast(text, value)) return "expected a number, got '" + text + "'";
      return std::isfinite(value) ? std::string() : "expected a finite number, got " + text;
    },
    "FINITE", "FINITE");

// A text that must say something: `--data ''` had meant "not given" and trained on the default
// data set.
inline const CLI::Validator kNotEmpty = CLI::Validator(
    [](std::string& text) -> std::string {
      return text.empty() ? "expected a value, got an empty one" : std::string();
    },
    "", "NOT EMPTY");

// Threads one process may ask for: more than any machine has cores, and far fewer than the
// stacks it would take to start them (--loader-threads 100000 had crashed).
inline constexpr long long kMaxThreads = 4096;

// A count from 1 to `most` ("--threads: at most 4096, got 100000"): more is no machine's.
inline CLI::Validator count_check(long long most) {
  return CLI::Validator(
      [most](std::string& text) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(text, value)) return "expected a number, got '" + text + "'";
        if (!(value > 0)) return "must be > 0, got " + text;
        if (value > static_cast<double>(most)) return cat("at most ", most, ", got ", text);
        return {};
      },
      cat("1 to ", most), "COUNT");
}

// "HxW" (e.g. --resize 256x256) as {H, W}; a UsageError naming `flag` otherwise.
inline std::pair<int, int> parse_size(const std::string& text, const char* flag) {
  int h = 0, w = 0;
  char x = 0, extra = 0;
  if (std::sscanf(text.c_str(), "%d%c%d%c", &h, &x, &w, &extra) != 3 || x != 'x' || h <= 0 || w <= 0)
    throw UsageError(cat(flag, ": expected HxW with two positive integers, got '", text, "'"));
  if (const std::string problem = image_size_problem(h, w); !problem.empty())
    throw UsageError(cat(flag, " ", text, ": ", problem));
  return {h, w};
}

}  // namespace cgdp::cli
