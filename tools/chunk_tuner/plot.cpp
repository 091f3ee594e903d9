// Time against chunk size, as the CGDP paper's Figure 2, drawn by gnuplot from an inline data
// block.
#include <stdio.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>

#include "cgdp/core/error.hpp"
#include "chunk_tuner.hpp"

namespace cgdp::tuner {

namespace {

// gnuplot's single-quoted string: only a quote needs doubling.
std::string quoted(const std::string& text) {
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::string terminal_for(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".svg") return "svg size 900,540 dynamic enhanced background rgb 'white'";
  if (ext == ".png") return "pngcairo size 900,540 enhanced";
  throw UsageError(cat("--plot '", path, "': expected a file name ending in .svg or .png"));
}

namespace {

std::string script(const std::vector<SweepRow>& rows, const std::string& path,
                   const std::string& title) {
  bool measured = false;
  std::string data = "$sweep << EOD\n";
  for (const SweepRow& row : rows) {
    measured |= !row.ms.empty();
    data += cat(row.chunk_size, " ", row.median_ms, " ", row.min_ms, " ", row.max_ms, " ",
                row.candidate.predicted_ms, " \"", row.candidate.spec, "\"\n");
  }
  data += "EOD\n";
  std::string plots;
  if (measured)
    plots =
        "$sweep using 1:2:3:4 with yerrorbars lc rgb '#1f77b4' pt 7 title 'measured: median, "
        "min..max', "
        "$sweep using 1:2 with lines lc rgb '#1f77b4' notitle, "
        "$sweep using 1:2:6 with labels offset 0,1 font ',9' notitle";
  const bool predicted = std::any_of(rows.begin(), rows.end(), [](const SweepRow& r) {
    return !std::isnan(r.candidate.predicted_ms);
  });
  if (predicted)
    plots += cat(plots.empty() ? "" : ", ",
                 "$sweep using 1:5 with linespoints dt 2 lc rgb '#d62728' pt 6 title 'predicted'",
                 measured ? "" : ", $sweep using 1:5:6 with labels offset 0,1 font ',9' notitle");
  return cat(
      "set terminal ", terminal_for(path), "\nset output ", quoted(path), "\n", data,
      "set datafile missing 'nan'\nset title ", quoted(title), " noenhanced\n",
      "set xlabel 'chunk size (layers per chunk, mean)'\nset ylabel 'time per iteration (ms)'\n",
      "set grid\nset key top left\nset offsets graph 0.05, graph 0.05, graph 0.1, graph 0.05\n",
      "plot ", plots, "\n");
}

}  // namespace

void plot_rows(const std::vector<SweepRow>& rows, const std::string& path,
               const std::string& title) {
  const std::string text = script(rows, path, title);
  FILE* gnuplot = ::popen("gnuplot 2>&1", "w");
  if (!gnuplot) throw IoError(cat(path, ": could not start gnuplot"));
  ::fwrite(text.data(), 1, text.size(), gnuplot);
  const int status = ::pclose(gnuplot);
  const int code = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 127)
    throw UsageError(
        cat("--plot needs gnuplot, which is not installed (Debian: apt-get install gnuplot-nox)"));
  if (code != 0 || !std::filesystem::exists(path))
    throw IoError(cat(path, ": gnuplot failed (exit ", code, ")"));
}

}  // namespace cgdp::tuner
