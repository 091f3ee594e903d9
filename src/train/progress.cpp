// Progress lines and the metrics file (JSON lines, flushed at each point so a crash loses none).
#include "cgdp/train/progress.hpp"

#include <unistd.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "cgdp/core/error.hpp"
#include "cgdp/core/fixed.hpp"

namespace cgdp {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<long long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, s % 3600 / 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%llds", s);
  return buf;
}

ProgressReporter::ProgressReporter(FILE* out, const std::string& metrics_path, bool force_plain)
    : out_(out), live_(!force_plain && isatty(fileno(out))), metrics_path_(metrics_path) {
  if (!metrics_path.empty()) {
    metrics_.open(metrics_path, std::ios::out | std::ios::trunc);
    if (!metrics_) throw IoError(cat(metrics_path, ": cannot create the metrics file"));
  }
}

ProgressReporter::~ProgressReporter() { end_live_line(); }

void ProgressReporter::end_live_line() {
  if (live_line_open_) std::fputc('\n', out_);
  live_line_open_ = false;
}

void ProgressReporter::train_point(const ProgressPoint& p) {
  const double remaining = p.images_per_s > 0 && p.iteration > 0
                               ? p.elapsed_s / p.iteration * (p.max_iterations - p.iteration)
                               : NAN;
  std::fprintf(out_, "%siter %lld/%lld  epoch %.2f  loss %.4f  %.0f img/s  elapsed %s  ETA %s%s",
               live_ ? "\r\033[K" : "", static_cast<long long>(p.iteration),
               static_cast<long long>(p.max_iterations), p.epoch, p.loss, p.images_per_s,
               format_duration(p.elapsed_s).c_str(), format_duration(remaining).c_str(),
               live_ ? "" : "\n");
  live_line_open_ = live_;
  std::fflush(out_);
  write_metrics("train", p);
}

void ProgressReporter::test_point(const ProgressPoint& p) {
  end_live_line();
  std::string line =
      cat("test  iter ", p.iteration, "  epoch ", fixed(p.epoch, 2),
          p.test_net.empty() ? "" : cat("  net ", p.test_net), "  accuracy ",
          p.accuracy ? fixed(*p.accuracy, 4) : std::string("- (no Accuracy layer)"), "  loss ",
          p.test_loss ? fixed(*p.test_loss, 4) : std::string("- (no loss layer in the TEST net)"));
  for (const auto& [name, value] : p.test_outputs) line += cat("  ", name, " ", fixed(value, 4));
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
  write_metrics("test", p);
}

void ProgressReporter::message(const std::string& line) {
  end_live_line();
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

void ProgressReporter::write_metrics(const char* phase, const ProgressPoint& p) {
  if (!metrics_.is_open()) return;
  nlohmann::json j = {{"phase", phase},          {"iteration", p.iteration}, {"epoch", p.epoch},
                      {"loss", p.loss},          {"images_per_s", p.images_per_s},
                      {"elapsed_s", p.elapsed_s}};
  if (!p.test_net.empty()) j["net"] = p.test_net;
  if (p.accuracy) j["accuracy"] = *p.accuracy;
  for (const auto& [name, value] : p.test_outputs) j["outputs"][name] = value;
  if (p.test_loss) j["loss"] = *p.test_loss;
  metrics_ << j.dump() << "\n";
  metrics_.flush();
  if (!metrics_) throw IoError(cat(metrics_path_, ": write failed"));
}

}  // namespace cgdp
