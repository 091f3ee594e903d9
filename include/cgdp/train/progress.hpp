// Progress reporting for a training run: a live line on a terminal, plain lines otherwise, and
// optionally one JSON object per line in a metrics file for plotting.
#pragma once

#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>
#include <string>

namespace cgdp {

struct ProgressPoint {
  int64_t iteration = 0;
  int64_t max_iterations = 0;
  double epoch = 0;
  double loss = 0;                  // mean training loss since the last point
  double images_per_s = 0;
  double elapsed_s = 0;
  // Set at test points: the headline accuracy, the loss (none when the test net has no loss
  // layer), and every other scalar output of the test net by top name (GoogLeNet's top-5s...).
  std::optional<double> accuracy;
  std::optional<double> test_loss;
  std::vector<std::pair<std::string, double>> test_outputs;
  std::string test_net;  // with several test nets: which, e.g. "#1 (stage test-on-test)"
};

class ProgressReporter {
 public:
  // `metrics_path` empty: no metrics file. Throws IoError if it cannot be created.
  ProgressReporter(FILE* out, const std::string& metrics_path, bool force_plain = false);
  ~ProgressReporter();

  void train_point(const ProgressPoint& p);  // live update (terminal) or a plain line
  void test_point(const ProgressPoint& p);   // always its own line
  void message(const std::string& line);     // a line of its own, keeping the live line intact

 private:
  void write_metrics(const char* phase, const ProgressPoint& p);
  void end_live_line();

  FILE* out_;
  bool live_;
  bool live_line_open_ = false;
  std::string metrics_path_;
  std::ofstream metrics_;
};

// "1m23s", "45s", "2h05m"
std::string format_duration(double seconds);

}  // namespace cgdp
