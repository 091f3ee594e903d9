// What the fuzz targets share: the input as bytes, and the rule that a parser may refuse any
// input with one of cgdp's errors, and with nothing else.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <regex>
#include <string>
#include <typeinfo>

#include "cgdp/core/error.hpp"

namespace cgdp::fuzz {

inline std::string bytes_of(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// CGDP_ASSERT's message, "<source file>:<line>: internal check failed: <condition>". Matched at
// the start only: a refusal may quote the input, and the input may say anything.
inline bool is_internal_check(const Error& e) {
  static const std::regex where(R"re(\S+\.(cpp|hpp|h):[0-9]+)re");
  const std::string message = e.what();
  const size_t at = message.find(": internal check failed: ");
  return at != std::string::npos && std::regex_match(message.begin(), message.begin() + at, where);
}

// Runs `parse`. A cgdp::Error is a refusal and expected; a failed internal check or any other
// exception is a bug, so it aborts for libFuzzer to keep the input.
template <typename Parse>
void expect_cgdp_errors_only(Parse&& parse) {
  try {
    parse();
  } catch (const Error& e) {
    if (!is_internal_check(e)) return;
    std::fprintf(stderr, "fuzz: %s\n", e.what());
    std::abort();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: %s escaped the parser: %s\n", typeid(e).name(), e.what());
    std::abort();
  }
}

}  // namespace cgdp::fuzz
