// Slurm's compressed lists, expanded as `scontrol show hostnames` and Slurm's own tools do:
// node lists ("gpu-a[01-03,07],cpu[1-2]") and tasks per node ("2(x3),1").
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cgdp {

// Every node name, in order. A bracket holds numbers and ranges ("01-03", "7"); a range keeps the
// zero padding of its first bound; several brackets in one name multiply out. Throws UsageError
// naming `what` (the variable) for an unbalanced bracket, an empty name or a range that runs
// backwards.
std::vector<std::string> expand_slurm_nodelist(std::string_view list, std::string_view what);

// SLURM_STEP_TASKS_PER_NODE's "2(x3),1" as {2, 2, 2, 1}. Throws UsageError naming `what`.
std::vector<int> expand_slurm_tasks_per_node(std::string_view list, std::string_view what);

}  // namespace cgdp
