// `cgdp predict` end to end on a tiny model and a profile made for it: the table, the JSON (whose
// best plan, pasted back as --chunk, predicts what the search said), what-if flags, and one-line
// errors for profiles that do not fit the model, bad fields, bad plans and bad what-if values;
// --hosts: the network stage per chunk, one host exactly as before, and its bad values.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cgdp/core/error.hpp"
#include "cgdp/cost/loader_stage.hpp"
#include "cgdp/cost/profile.hpp"
#include "cgdp/device/cpu_device.hpp"
#include "cgdp/io/file.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/net/net.hpp"
#include "cgdp/sync/chunk_plan.hpp"
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"
#include "support/test_paths.hpp"

namespace cgdp {
namespace {

using Json = nlohmann::json;

constexpr const char* kModel = R"(name: "tiny"
layer { name: "data" type: "Input" top: "data" top: "label"
  input_param { shape { dim: 2 dim: 1 dim: 8 dim: 8 } shape { dim: 2 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3 } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "conv2" type: "Convolution" bottom: "conv1" top: "conv2"
  convolution_param { num_output: 4 kernel_size: 3 } }
layer { name: "fc1" type: "InnerProduct" bottom: "conv2" top: "fc1"
  inner_product_param { num_output: 64 } }
layer { name: "fc2" type: "InnerProduct" bottom: "fc1" top: "fc2"
  inner_product_param { num_output: 10 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc2" bottom: "label" top: "loss" }
)";

class PredictCli : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = (dir_ / "tiny.prototxt").string();
    testing::write_bytes(model_, kModel);
    profile_ = (dir_ / "p.json").string();
    write_profile(make_profile(), profile_);
  }

  // A profile of the tiny model: names and parameter sizes from the net itself.
  Profile make_profile() const {
    Net<float> net(load_model(model_), Phase::Train, default_cpu_device(), 1, 1, model_);
    Profile p;
    p.model = "tiny";
    p.backend = "cpu";
    p.device = "test";
    p.devices = 2;
    for (int i = 0; i < net.num_layers(); ++i)
      p.layers.push_back({net.layer(i).name(), net.layer(i).type(), 10.0 + i, 20.0 + 2 * i, 0});
    for (const ParamLayer& l : param_layers(net)) p.layers[l.layer].param_bytes = l.count * 4;
    p.d2h = {0.01, 5};  // slow copies: the plan matters
    p.h2d = {0.02, 5};
    p.p2p = {0.01, 5};
    p.sync_us = 3;
    p.host_sum = {{2, 0.05}};
    p.update_gbps = 1;
    p.device_sum_gbps = 1;
    return p;
  }

  // Writes the profile JSON with `edit` applied; returns its path.
  std::string edited(const std::function<void(Json&)>& edit) {
    Json j = Json::parse(read_file(profile_));
    edit(j);
    const std::string path = (dir_ / "edited.json").string();
    testing::write_bytes(path, j.dump());
    return path;
  }

  testing::CommandResult run(const std::string& args) const {
    return testing::run_command(
        cat(testing::binary_dir(), "/cgdp predict --model ", model_, " ", args, " 2>&1"));
  }

  Json run_json(const std::string& args) const {
    const testing::CommandResult r = run(args + " --json");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return Json::parse(r.output);
  }

  // Exactly one line "cgdp: error: ..." holding every part, and exit 1.
  void expect_error(const std::string& args, std::initializer_list<std::string> parts) const {
    const testing::CommandResult r = run(args);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_EQ(r.output.rfind("cgdp: error: ", 0), 0u) << r.output;
    for (const auto& part : parts)
      EXPECT_NE(r.output.find(part), std::string::npos) << part << " in " << r.output;
  }

  testing::TempDir dir_;
  std::string model_, profile_;
};

TEST_F(PredictCli, TableShowsLayersSchemesAndBestPlans) {
  const testing::CommandResult r = run("--profile " + profile_ + " --formula");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* part :
       {"conv1", "relu1", "fc2", "param bytes", "cgdp --chunk layer", "ps0", "T_O", "T'_O",
        "best plan (exact search): --chunk ", "best equal-size plan (paper, K = 1..4): --chunk ",
        " ms per iteration, T(1)/T(2) = "})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << " in " << r.output;
}

TEST_F(PredictCli, WithoutChunkItPredictsTrainsDefaultForTheProfilesBackend) {
  EXPECT_EQ(run_json("--profile " + profile_)["chunk"], "layer");
  Profile cuda = make_profile();
  cuda.backend = "cuda";
  const std::string path = (dir_ / "cuda.json").string();
  write_profile(cuda, path);
  const Json j = run_json("--profile " + path);
  EXPECT_EQ(j["chunk"], cat("bytes:", kDefaultCudaChunkMiB));
  // The tiny model's gradients fit one chunk of the default cap.
  EXPECT_EQ(j["layers"][1]["chunk"], 0);
}

TEST_F(PredictCli, BestPlanPastedBackPredictsWhatTheSearchSaid) {
  const Json j = run_json("--profile " + profile_ + " --fc-exchange dense");
  EXPECT_EQ(j["devices"], 2);
  EXPECT_EQ(j["layers"].size(), 7u);
  EXPECT_EQ(j["layers"][1]["name"], "conv1");
  EXPECT_EQ(j["layers"][1]["chunk"], 3);  // per layer, backward order: fc2 fc1 conv2 conv1
  EXPECT_TRUE(j["layers"][2]["chunk"].is_null());
  const std::string best = j["best"]["chunk"];
  const double best_us = j["best"]["iteration_us"];
  const Json again = run_json("--profile " + profile_ + " --fc-exchange dense --chunk " + best);
  const double simulated = again["cgdp"]["simulated"]["iteration_us"];
  EXPECT_NEAR(simulated, best_us, 1e-9 * best_us) << best;
  EXPECT_LE(best_us, j["cgdp"]["simulated"]["iteration_us"].get<double>() * (1 + 1e-12));
  EXPECT_LE(best_us, j["best_equal_size"]["iteration_us"].get<double>() * (1 + 1e-12));
  // Each plan's weak-scaling efficiency is T(1) over its own iteration.
  const double single = j["cgdp"]["single_worker_iteration_us"];
  EXPECT_DOUBLE_EQ(j["best"]["weak_scaling_efficiency"].get<double>(), single / best_us);
  EXPECT_GE(j["best"]["weak_scaling_efficiency"].get<double>(),
            j["cgdp"]["weak_scaling_efficiency"].get<double>() * (1 - 1e-12));
  EXPECT_EQ(j["equal_size"].size(), 4u);
}

TEST_F(PredictCli, WhatIfFlagsChangeThePrediction) {
  const Json base = run_json("--profile " + profile_);
  const Json fast =
      run_json("--profile " + profile_ + " --d2h-gbps 100 --h2d-gbps 100 --host-threads 8");
  EXPECT_LT(fast["cgdp"]["simulated"]["iteration_us"].get<double>(),
            base["cgdp"]["simulated"]["iteration_us"].get<double>());
  const Json four = run_json("--profile " + profile_ + " --devices 4 --batch 2");
  EXPECT_EQ(four["devices"], 4);
  // Twice the batch: twice the forward time.
  EXPECT_NEAR(four["cgdp"]["simulated"]["forward_us"].get<double>(),
              2 * base["cgdp"]["simulated"]["forward_us"].get<double>(), 1e-9);
  EXPECT_GT(four["ps0"]["simulated"]["exchange_after_backward_us"].get<double>(),
            base["ps0"]["simulated"]["exchange_after_backward_us"].get<double>());
  // Per-layer chunks on 2 shared cores: each exchange but the last slows the layers below.
  const Json shared = run_json("--profile " + profile_ + " --chunk layer --shared-cores 2");
  const Json alone = run_json("--profile " + profile_ + " --chunk layer --shared-cores 0");
  EXPECT_GT(shared["cgdp"]["simulated"]["backward_us"].get<double>(),
            alone["cgdp"]["simulated"]["backward_us"].get<double>());
  expect_error("--profile " + profile_ + " --shared-cores -1",
               {"--shared-cores: expected an integer from 0 to 4096, got -1"});
  // Measured contention scales it: three times the factor, three times the slow-down.
  const Json thrice =
      run_json("--profile " + profile_ + " --chunk layer --shared-cores 2 --contention-factor 3");
  const double slowdown = shared["cgdp"]["simulated"]["backward_us"].get<double>() -
                          alone["cgdp"]["simulated"]["backward_us"].get<double>();
  EXPECT_NEAR(thrice["cgdp"]["simulated"]["backward_us"].get<double>() -
                  alone["cgdp"]["simulated"]["backward_us"].get<double>(),
              3 * slowdown, 1e-6 * slowdown);
  expect_error("--profile " + profile_ + " --contention-factor -2",
               {"--contention-factor: expected a number from 0 to 1e+06, got -2"});
}

TEST_F(PredictCli, ProfileOfAnotherModelNamesTheLayer) {
  const std::string renamed = edited([](Json& j) { j["layers"][3]["name"] = "conv9"; });
  expect_error("--profile " + renamed, {renamed, "layers[3].name is 'conv9'", "'conv2'"});
  const std::string shorter = edited([](Json& j) { j["layers"].erase(6); });
  expect_error("--profile " + shorter, {shorter, "the profile has 6 layers, the model 7"});
  const std::string bytes = edited([](Json& j) { j["layers"][4]["param_bytes"] = 8; });
  expect_error("--profile " + bytes, {bytes, "layers[4].param_bytes of 'fc1' is 8"});
}

// Without --model, predict reads the model the profile names: a path, or a name from models/.
TEST_F(PredictCli, WithoutModelThePredictionIsForTheProfilesModel) {
  const std::string named = edited([&](Json& j) { j["model"] = model_; });
  const auto predict = [](const std::string& args) {
    return testing::run_command(cat(testing::binary_dir(), "/cgdp predict ", args, " 2>&1"));
  };
  testing::CommandResult r = predict("--profile " + named + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(Json::parse(r.output)["model"], model_);
  const std::string alexnet =
      cat(testing::source_dir(), "/docs/examples/profile_alexnet_p100x4.json");
  r = predict("--profile " + alexnet);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("models/alexnet.prototxt with " + alexnet), std::string::npos)
      << r.output;
  const std::string elsewhere = edited([](Json& j) { j["model"] = "/gone/net.prototxt"; });
  r = predict("--profile " + elsewhere);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output, "cgdp: error: " + elsewhere +
                          " was measured on model '/gone/net.prototxt', which is not here: give "
                          "--model\n");
}

TEST_F(PredictCli, BadProfileFieldsAreOneLine) {
  const std::string negative = edited([](Json& j) { j["d2h"]["gbps"] = -3; });
  expect_error("--profile " + negative, {negative + ": d2h.gbps: expected a bandwidth from 0.001 to 1e+06"});
  const std::string zero = edited([](Json& j) { j["h2d"]["gbps"] = 0; });
  expect_error("--profile " + zero, {zero + ": h2d.gbps: expected a bandwidth from 0.001 to 1e+06"});
  const std::string missing = edited([](Json& j) { j["layers"][2].erase("backward_us"); });
  expect_error("--profile " + missing, {missing + ": layers[2].backward_us: missing"});
  expect_error("--profile " + (dir_ / "none.json").string(), {"none.json"});
}

TEST_F(PredictCli, BadPlansAndWhatIfValuesAreOneLine) {
  expect_error("--profile " + profile_ + " --chunk 2,9",
               {"--chunk '2,9'", "out of range", "4 param layers"});
  expect_error("--profile " + profile_ + " --chunk 3,1", {"--chunk '3,1'", "strictly increasing"});
  expect_error("--profile " + profile_ + " --chunk halves", {"--chunk 'halves'"});
  expect_error("--profile " + profile_ + " --d2h-gbps 0", {"--d2h-gbps", "expected a bandwidth from 0.001 to 1e+06"});
  expect_error("--profile " + profile_ + " --host-threads 0", {"--host-threads", "from 1 to 4096"});
}

// 64 samples in 10 ms are 6400 images/s: 64 threads of 100 keep up; 8 give 800, so 80 ms.
TEST(LoaderStage, ThreadsAddUpAgainstWhatTheWorkersTake) {
  const LoaderCost cost{100, 1, "test"};
  LoaderPrediction p = predict_loader(cost, 64, 10e3, 8);
  EXPECT_DOUBLE_EQ(p.needed_images_per_s, 6400);
  EXPECT_EQ(p.threads_needed, 64);
  EXPECT_DOUBLE_EQ(p.images_per_s, 800);
  EXPECT_TRUE(p.loader_bound);
  EXPECT_DOUBLE_EQ(p.iteration_us, 80e3);
  p = predict_loader(cost, 64, 10e3, 64);
  EXPECT_FALSE(p.loader_bound);
  EXPECT_DOUBLE_EQ(p.iteration_us, 10e3);
  EXPECT_EQ(predict_loader(cost, 64, 10e3, 65).iteration_us, 10e3);
}

TEST_F(PredictCli, ALoaderRateInTheProfileSaysWhenTheLoaderBinds) {
  Profile p = make_profile();
  p.loader = LoaderCost{50, 2, "folder:x (train), 1x8x8"};
  const std::string with_loader = (dir_ / "loader.json").string();
  write_profile(p, with_loader);
  EXPECT_EQ(read_profile(with_loader).loader->images_per_s_per_thread, 50);
  const Json j = run_json("--profile " + with_loader);
  const double compute_us = j["cgdp"]["simulated"]["iteration_us"];
  const double samples = 2.0 * p.batch;  // 2 workers
  EXPECT_EQ(j["loader"]["threads"], 2);
  EXPECT_EQ(j["loader"]["loader_bound"], samples / 100.0 > compute_us * 1e-6);
  EXPECT_NEAR(j["loader"]["iteration_us"].get<double>(), std::max(compute_us, samples / 100.0 * 1e6), 1e-6);
  // One thread of a rate far below what the workers take: loader-bound, and said so.
  p.loader->images_per_s_per_thread = samples / (compute_us * 1e-6) / 10;
  write_profile(p, with_loader);
  testing::CommandResult r = run("--profile " + with_loader + " --loader-threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: loader-bound: 1 loader thread decode"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("give --loader-threads 10"), std::string::npos) << r.output;
  r = run("--profile " + with_loader + " --loader-threads 10");
  EXPECT_NE(r.output.find("it keeps up"), std::string::npos) << r.output;
  expect_error("--profile " + profile_ + " --loader-threads 2", {"has no loader rate"});
  const std::string zero = edited([](Json& j) { j["loader"] = {{"images_per_s_per_thread", 0}, {"threads", 1}, {"data", ""}}; });
  expect_error("--profile " + zero, {zero + ": loader.images_per_s_per_thread: expected a number > 0"});
}

TEST_F(PredictCli, HostsShowTheNetworkStagePerChunk) {
  const std::string args = "--profile " + profile_ + " --hosts 2 --network-gbps 0.1";
  const testing::CommandResult r = run(args + " --formula");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* part : {"network: 2 hosts, 0.1 Gbit/s, 0 us per message", "network", "landed",
                           "ps0                              not predicted: --hosts needs "
                           "--sync cgdp"})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << " in " << r.output;
  const Json j = run_json(args);
  EXPECT_EQ(j["hosts"], 2);
  EXPECT_EQ(j["network"]["gbit_per_s"], 0.1);
  ASSERT_EQ(j["chunks"].size(), 4u);
  for (const Json& c : j["chunks"]) {
    // Two hosts: each link carries the chunk's summed bytes (the weights sent as factors go
    // apart) once each way, at 12.5 bytes/us, plus the shard's sum of two inputs over its part.
    const double bytes = c["bytes"];
    EXPECT_GE(c["network_us"].get<double>(), bytes / 12.5) << c.dump();
    EXPECT_LE(c["network_us"].get<double>(), bytes / 12.5 + bytes / 50 + 1e-9) << c.dump();
  }
  EXPECT_TRUE(j["ps0"].contains("error"));
  const double one_host = run_json("--profile " + profile_)["cgdp"]["simulated"]["iteration_us"];
  EXPECT_GT(j["cgdp"]["simulated"]["iteration_us"].get<double>(), one_host);
  // The best plan with the network, pasted back, predicts what the search said.
  const Json again = run_json(args + " --chunk " + j["best"]["chunk"].get<std::string>());
  EXPECT_NEAR(again["cgdp"]["simulated"]["iteration_us"].get<double>(),
              j["best"]["iteration_us"].get<double>(), 1e-9 * one_host);
}

TEST_F(PredictCli, OneHostPredictsExactlyAsBefore) {
  Json plain = run_json("--profile " + profile_ + " --formula");
  Json one = run_json("--profile " + profile_ + " --formula --hosts 1 --network-gbps 0.001");
  EXPECT_FALSE(one.contains("chunks"));
  EXPECT_EQ(one, plain);
}

TEST_F(PredictCli, ProfileNetworkAndFlagsOverrideIt) {
  const std::string networked = edited([](Json& j) {
    j["network"] = {{"gbit_per_s", 0.1}, {"latency_us", 0}};
  });
  const Json from_profile = run_json("--profile " + networked + " --hosts 2");
  const Json from_flag = run_json("--profile " + profile_ + " --hosts 2 --network-gbps 0.1");
  EXPECT_EQ(from_profile["cgdp"], from_flag["cgdp"]);
  const Json faster = run_json("--profile " + networked + " --hosts 2 --network-gbps 10");
  EXPECT_LT(faster["cgdp"]["simulated"]["iteration_us"].get<double>(),
            from_profile["cgdp"]["simulated"]["iteration_us"].get<double>());
  const Json latency = run_json("--profile " + networked + " --hosts 2 --network-latency-us 100");
  EXPECT_GT(latency["chunks"][0]["network_us"].get<double>(),
            from_profile["chunks"][0]["network_us"].get<double>() + 99);
}

TEST_F(PredictCli, BadHostsAndNetworkAreOneLine) {
  expect_error("--profile " + profile_ + " --hosts 0", {"--hosts: expected an integer from 1 to 4096"});
  expect_error("--profile " + profile_ + " --hosts 2",
               {"--hosts 2 needs the network's bandwidth", "--network-gbps", "network.gbit_per_s",
                profile_});
  expect_error("--profile " + profile_ + " --hosts 2 --network-gbps 0",
               {"--network-gbps: expected a bandwidth from 0.001 to 1e+06"});
  expect_error("--profile " + profile_ + " --hosts 2 --network-gbps -5",
               {"--network-gbps: expected a bandwidth from 0.001 to 1e+06"});
  expect_error("--profile " + profile_ + " --hosts 2 --network-gbps 1 --network-latency-us -1",
               {"--network-latency-us: expected a number from 0 to 1e+09"});
  const std::string zero = edited([](Json& j) {
    j["network"] = {{"gbit_per_s", 0}, {"latency_us", 0}};
  });
  expect_error("--profile " + zero + " --hosts 2",
               {zero + ": network.gbit_per_s: expected a bandwidth from 0.001 to 1e+06"});
}

}  // namespace
}  // namespace cgdp
