// A run's tests: its test nets (the first, and a solver's later ones), each evaluated over its
// data on worker 0, and the progress point they make.
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>

#include "cgdp/net/graph_rewrite.hpp"
#include "cgdp/net/model_file.hpp"
#include "cgdp/train/run_notes.hpp"
#include "cgdp/train/trainer.hpp"

namespace cgdp {

namespace {

// The accuracy people quote, found by layer type: the last Accuracy layer with top_k 1 (GoogLeNet's
// loss3/top-1), else the last Accuracy layer; none without one.
std::optional<std::string> headline_accuracy(const Net<float>& net) {
  std::optional<std::string> top1, any;
  for (int i = 0; i < net.num_layers(); ++i) {
    if (net.layer(i).type() != "Accuracy" || net.top_names(i).empty()) continue;
    any = net.top_names(i)[0];
    if (net.layer(i).param().accuracy_param().top_k() == 1) top1 = any;
  }
  return top1 ? top1 : any;
}

}  // namespace

// A solver's later test nets: the model again, with each one's test_state, gives its TEST net and
// its data layer (a staged model holds one per test net).
void Trainer::build_more_test_nets() {
  for (const TrainConfig::MoreTestNet& spec : config_.more_test_nets) {
    TrainConfig c = config_;
    c.test_state = spec.state;
    const std::string path = spec.model.empty() ? model_path_ : find_model_file(spec.model);
    proto::NetParameter model = load_model(path);
    const DataFeeds feeds = plan_data_feeds(
        model, path, c, spec.model.empty() ? FeedPhases::kBoth : FeedPhases::kTestOnly);
    require_test_net(feeds, path);
    if (config_.gemm_convolutions) use_gemm_convolutions(model);
    MoreTest t;
    t.name = test_net_name(static_cast<int>(more_tests_.size()) + 1);
    t.feed = feeds.test;
    t.batch = test_batch_size(feeds, config_.test_batch, per_worker_batch_);
    t.iterations = spec.iterations;
    t.net = make_test_net(model, net(), net().device(), t.batch, config_.seed, path);
    more_tests_.push_back(std::move(t));
  }
}

std::string Trainer::test_net_name(int k) const {
  if (config_.more_test_nets.empty()) return "";
  const proto::NetState& state = k == 0 ? config_.test_state : config_.more_test_nets[k - 1].state;
  std::string stages;
  for (const std::string& s : state.stage()) stages += cat(stages.empty() ? "" : ", ", s);
  const std::string& file = k == 0 ? config_.test_model : config_.more_test_nets[k - 1].model;
  if (!file.empty())  // a solver's test_net files: each by its file
    return cat("#", k, " (", std::filesystem::path(file).filename().string(),
               stages.empty() ? "" : cat(", stage ", stages), ")");
  return cat("#", k, stages.empty() ? "" : cat(" (stage ", stages, ")"));
}

Trainer::Evaluation Trainer::evaluate() {
  Evaluation e = evaluate(*test_net_, test_data_, test_batch_, config_.test_iter);
  e.net = test_net_name(0);
  return e;
}

std::vector<Trainer::Evaluation> Trainer::evaluate_all() {
  std::vector<Evaluation> all = {evaluate()};
  for (MoreTest& t : more_tests_) {
    all.push_back(evaluate(*t.net, t.data, t.batch, t.iterations));
    all.back().net = t.name;
  }
  return all;
}

Trainer::Evaluation Trainer::evaluate(Net<float>& test_net,
                                      const std::shared_ptr<const Dataset>& data, int64_t batch,
                                      int64_t iterations) {
  average_state();
  Worker& w = workers_[0];
  LoaderOptions lo;
  lo.global_batch = batch;
  lo.order = Order::Sequential;
  lo.epoch_end = EpochEnd::PadLastBatch;
  lo.threads = loader_threads(*data);
  lo.thread_start = loader_binding();
  BatchLoader loader(data, lo, *w.device);
  const int64_t asked = iterations > 0 ? iterations * batch : config_.test_samples;
  const int64_t samples = asked > 0 ? std::min(asked, data->size()) : data->size();
  const std::optional<std::string> headline = headline_accuracy(test_net);
  const bool has_loss = !test_net.loss_tops().empty();
  std::map<std::string, double> sums;  // every scalar output, weighted by its batch's rows
  double loss = 0;
  int64_t seen = 0;
  while (seen < samples) {
    const Batch& b = loader.next();
    const int64_t rows = std::min(b.valid, samples - seen);
    test_net.set_batch_size(rows);
    Blob<float>& input = test_net.input_data();
    w.compute->copy_async(input.mutable_data(), b.images, input.bytes());
    if (Blob<float>* label = test_net.input_label())
      w.compute->copy_async(label->mutable_data(), b.labels, label->bytes());
    test_net.forward({Phase::Test, w.compute.get(), config_.seed, iteration(), seen});
    synchronize_stream(w, *w.compute, "compute", iteration());
    for (const auto& [name, value] : test_net.scalar_outputs())
      sums[name] += value * static_cast<double>(rows);
    if (has_loss) loss += test_net.loss() * static_cast<double>(rows);
    seen += rows;
  }
  test_net.set_batch_size(batch);
  Evaluation e;
  for (const auto& [name, sum] : sums) {
    if (name == headline)
      e.accuracy = sum / static_cast<double>(seen);
    else
      e.outputs.emplace_back(name, sum / static_cast<double>(seen));
  }
  if (has_loss) e.loss = loss / static_cast<double>(seen);
  e.samples = seen;
  if (e.loss && !std::isfinite(*e.loss)) {  // as check_loss: a NaN test is no result to report
    throw RuntimeCheckError(
        cat("test after iteration ", iteration(), ": the loss is ", *e.loss, "; ",
            non_finite_output(test_net).value_or("every layer output is finite"),
            " (the parameters or the test data hold NaN or inf)"));
  }
  return e;
}

// Every host tests (all hold the same parameters, so all print the same figures): a host that
// skipped it would wait that long for the others' next gradients, maybe past the timeout.
void Trainer::test_point(ProgressReporter& progress, ProgressPoint p, TrainResult& result) {
  const std::vector<Evaluation> all = evaluate_all();
  for (const Evaluation& e : all) {
    p.test_net = e.net;
    p.accuracy = e.accuracy;
    p.test_loss = e.loss;
    p.test_outputs = e.outputs;
    progress.test_point(p);
  }
  result.test_accuracy = all[0].accuracy.value_or(NAN);  // the first test net's, as Caffe's #0
  result.test_loss = all[0].loss.value_or(NAN);
}

}  // namespace cgdp
