// A model small enough for command-line runs of the chunk search and tuner (three param layers:
// ip2, ip1, conv1 in backward order) and a hand-written profile of it whose predicted best plan
// is the single chunk (sync points cost 1 ms each).
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

namespace cgdp::testing {

// Data for it: --data synthetic:1,8,8,10
inline std::string write_tiny_chunk_model(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / "tiny_chunks.prototxt";
  std::ofstream(path) << R"(name: "TinyChunks"
layer { name: "data" type: "Input" top: "data" top: "label"
  input_param { shape { dim: 4 dim: 1 dim: 8 dim: 8 } shape { dim: 4 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "xavier" } } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "ip1" type: "InnerProduct" bottom: "conv1" top: "ip1"
  inner_product_param { num_output: 16 weight_filler { type: "xavier" } } }
layer { name: "relu2" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
)";
  return path.string();
}

// Measured (by hand) with 2 workers of batch 4 on the CPU backend.
inline std::string write_tiny_chunk_profile(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / "tiny_chunks_profile.json";
  std::ofstream(path) << R"({
  "version": 1, "model": "tiny_chunks", "backend": "cpu", "device": "hand-written",
  "devices": 2, "batch": 4, "host_threads": 1,
  "layers": [
    {"name": "data", "type": "Input", "forward_us": 1, "backward_us": 0, "param_bytes": 0},
    {"name": "conv1", "type": "Convolution", "forward_us": 50, "backward_us": 100, "param_bytes": 160},
    {"name": "relu1", "type": "ReLU", "forward_us": 5, "backward_us": 5, "param_bytes": 0},
    {"name": "ip1", "type": "InnerProduct", "forward_us": 20, "backward_us": 40, "param_bytes": 9280},
    {"name": "relu2", "type": "ReLU", "forward_us": 1, "backward_us": 1, "param_bytes": 0},
    {"name": "ip2", "type": "InnerProduct", "forward_us": 2, "backward_us": 4, "param_bytes": 680},
    {"name": "loss", "type": "SoftmaxWithLoss", "forward_us": 1, "backward_us": 1, "param_bytes": 0}
  ],
  "d2h": {"gbps": 1, "latency_us": 5}, "h2d": {"gbps": 1, "latency_us": 5},
  "p2p": {"gbps": 1, "latency_us": 5}, "sync_us": 1000,
  "host_sum": [{"inputs": 2, "gbps": 1}], "update_gbps": 1, "device_sum_gbps": 1
})";
  return path.string();
}

}  // namespace cgdp::testing
