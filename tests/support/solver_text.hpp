// Builds a SolverParameter from protobuf text, failing the test when the text does not parse.
#pragma once

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <string>

#include "cgdp.pb.h"

namespace cgdp::testing {

inline proto::SolverParameter solver_from_text(const std::string& text) {
  proto::SolverParameter p;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &p)) << text;
  return p;
}

}  // namespace cgdp::testing
