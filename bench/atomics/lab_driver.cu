// SPDX-License-Identifier: Apache-2.0
// The atomics lab's driver: options, device facts, the validate-count-time loop, output.
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <limits>
#include <sstream>

#include "atomics_lab.hpp"
#include "common/sizes.hpp"
#include "lab_common.cuh"

namespace canopy::bench {

const std::vector<std::string>& atomics_lab_experiments() {
  static const std::vector<std::string> names = {"containers", "max", "filter", "histogram", "copy"};
  return names;
}

namespace lab {

void context::progress(const std::string& line) const {
  if (options.quiet) return;
  if (options.progress)
    options.progress(line);
  else
    std::cout << line << std::endl;
}

namespace {

result_row make_row(const experiment_spec& spec, const variant& v) {
  result_row row;
  row.experiment = spec.name;
  row.variant = v.name;
  row.size = spec.size;
  row.baseline = v.baseline;
  row.bytes = spec.bytes_per_run;
  return row;
}

// After a CUDA error: a sticky one (illegal address, trap) poisons the context and every later
// call, so the lab stops instead of reporting a cascade of unrelated failures.
void stop_if_context_lost() {
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess)
    throw cuda_error(err, "CUDA context lost: " + cuda_message(err));
  (void)cudaGetLastError();
}

}  // namespace

std::vector<std::pair<std::string, std::uint64_t>> measure(context& ctx, const experiment_spec& spec,
                                                           std::vector<variant>& variants) {
  std::vector<std::pair<std::string, std::uint64_t>> counts;
  for (variant& v : variants) {
    result_row row = make_row(spec, v);
    auto fail = [&](const std::string& why) {
      row.status = row_status::failed;
      row.note = why;
      ctx.failed = true;
      ctx.progress("  FAILED " + spec.name + "/" + v.name + " @ " + format_size(spec.size) + ": " + why);
      ctx.table.add(row);
    };
    try {
      // 1. One run, checked against the host result before any time counts.
      if (v.reset) v.reset(ctx.stream);
      v.run(ctx.stream);
      CANOPY_CUDA_TRY(cudaGetLastError());
      CANOPY_CUDA_TRY(cudaStreamSynchronize(ctx.stream));
      if (std::string wrong = v.check(); !wrong.empty()) {
        fail(wrong);
        continue;
      }
      // 2. The counting run (same kernel, counting refs): atomics issued, and still right.
      if (v.counted_run) {
        const std::uint64_t issued = v.counted_run(ctx.stream);
        if (std::string wrong = v.check(); !wrong.empty()) {
          fail("counting run: " + wrong);
          continue;
        }
        counts.emplace_back(v.name, issued);
      }
      // 3. Time it, then check the last timed run too (a race may show only sometimes).
      const timing t = v.reset ? time_gpu(v.run, ctx.timing(), v.reset) : time_gpu(v.run, ctx.timing());
      if (std::string wrong = v.check(); !wrong.empty()) {
        fail("after timing: " + wrong);
        continue;
      }
      row.median_us = t.median_us;
      row.min_us = t.min_us;
      row.max_us = t.max_us;
      row.reps = static_cast<int>(t.samples_us.size());
      ctx.table.add(row);
      if (!ctx.options.quiet) {
        std::ostringstream line;
        line << "  " << spec.name << "/" << v.name << " @ " << format_size(spec.size) << ": " << std::fixed
             << std::setprecision(1) << t.median_us << " us";
        ctx.progress(line.str());
      }
    } catch (const cuda_error& e) {
      fail(e.what());
      stop_if_context_lost();
    }
  }
  return counts;
}

void report_counts(context& ctx, const experiment_spec& spec,
                   const std::vector<std::pair<std::string, std::uint64_t>>& counts, const std::string& reference,
                   const std::map<std::string, std::string>& notes) {
  std::uint64_t reference_count = 0;
  for (const auto& [name, c] : counts)
    if (name == reference) reference_count = c;
  for (const auto& [name, c] : counts) {
    count_row row;
    row.experiment = spec.name;
    row.variant = name;
    row.size = spec.size;
    row.what = "global_atomics";
    row.count = c;
    row.reference = name == reference ? 0 : reference_count;
    if (const auto it = notes.find(name); it != notes.end()) row.note = it->second;
    ctx.table.add(row);
  }
}

bool fits_or_skip(context& ctx, const std::string& experiment, std::uint64_t size, double bytes) {
  std::size_t free_bytes = 0, total_bytes = 0;
  CANOPY_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes));
  const double margin = 512.0 * (1 << 20);  // CUB temporaries, the driver's own needs
  if (bytes + margin <= static_cast<double>(free_bytes)) return true;
  result_row row;
  row.experiment = experiment;
  row.variant = "*";
  row.size = size;
  row.status = row_status::skipped;
  std::ostringstream note;
  note << "needs " << std::fixed << std::setprecision(1) << bytes / (1 << 30) << " GiB, "
       << static_cast<double>(free_bytes) / (1 << 30) << " GiB free";
  row.note = note.str();
  ctx.table.add(row);
  ctx.progress("  skipped " + experiment + " @ " + format_size(size) + ": " + row.note);
  return false;
}

}  // namespace lab

namespace {

std::string now_utc() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::ostringstream s;
  s << std::put_time(&tm, "%Y-%m-%dT%H:%M:%SZ");
  return s.str();
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string substitute(std::string text, const std::string& key, const std::string& value) {
  for (std::size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
    text.replace(at, key.size(), value);
  return text;
}

}  // namespace

int run_atomics_lab(const atomics_lab_options& options) {
  // Options first: bad input is reported whether or not there is a device.
  if (options.reps < 1 || options.warmup < 0) {
    std::cerr << "atomics lab: --reps must be >= 1 and --warmup >= 0\n";
    return 2;
  }
  if (options.sizes.empty()) {
    std::cerr << "atomics lab: no sizes given\n";
    return 2;
  }
  for (std::uint64_t n : options.sizes)
    if (n > static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max())) {
      std::cerr << "atomics lab: size " << n << " exceeds 2^31 - 1 elements (32-bit indices)\n";
      return 2;
    }
  std::vector<std::string> chosen = options.experiments.empty() ? atomics_lab_experiments() : options.experiments;
  for (const std::string& e : chosen) {
    const auto& all = atomics_lab_experiments();
    if (std::find(all.begin(), all.end(), e) == all.end()) {
      std::cerr << "atomics lab: unknown experiment '" << e << "' (containers, max, filter, histogram, copy)\n";
      return 2;
    }
  }
  if (!canopy::gpu_available()) {
    std::cerr << "atomics lab: no CUDA device; nothing to measure\n";
    return 77;
  }

  result_table table("atomics_lab");
  lab::context ctx{options, table, {}, 0, nullptr, false};
  try {
    CANOPY_CUDA_TRY(cudaSetDevice(options.device));
    ctx.device = query_device(options.device);
    ctx.copy_gb_per_s = measure_copy_bandwidth();
  } catch (const std::exception& e) {
    std::cerr << "atomics lab: " << e.what() << "\n";
    return 1;
  }
  table.set_copy_bandwidth(ctx.copy_gb_per_s);
  table.set_metadata("device", ctx.device.name);
  table.set_metadata("compute_capability", std::to_string(ctx.device.compute_major) + "." +
                                               std::to_string(ctx.device.compute_minor));
  table.set_metadata("sm_count", static_cast<double>(ctx.device.sm_count));
  table.set_metadata("global_memory_bytes", static_cast<double>(ctx.device.global_memory_bytes));
  table.set_metadata("reps", static_cast<double>(options.reps));
  table.set_metadata("warmup", static_cast<double>(options.warmup));
  table.set_metadata("block_size", static_cast<double>(lab::block_size));
  table.set_metadata("timing", "CUDA events around each run, median/min/max over reps after warm-up");
  table.set_metadata("validated", "every variant checked against a host result before timing and after it");
  table.set_metadata("started_utc", now_utc());
  {
    std::ostringstream head;
    head << "atomics lab on " << ctx.device.name << " (" << ctx.device.sm_count << " SMs), copy bandwidth "
         << std::fixed << std::setprecision(0) << ctx.copy_gb_per_s << " GB/s, " << options.reps << " reps after "
         << options.warmup << " warm-up";
    std::cout << head.str() << std::endl;
  }

  bool context_lost = false;
  for (std::uint64_t n : options.sizes) {
    for (const std::string& e : chosen) {
      ctx.progress(e + " @ " + format_size(n));
      try {
        if (e == "containers") lab::run_containers(ctx, n);
        if (e == "max") lab::run_max(ctx, n);
        if (e == "filter") lab::run_filter(ctx, n);
        if (e == "histogram") lab::run_histogram(ctx, n);
        if (e == "copy") lab::run_copy(ctx, n);
      } catch (const cuda_error& err) {
        result_row row;
        row.experiment = e;
        row.variant = "*";
        row.size = n;
        if (err.cuda_code() == cudaErrorMemoryAllocation) {
          (void)cudaGetLastError();
          row.status = row_status::skipped;
          row.note = "out of device memory";
        } else {
          row.status = row_status::failed;
          row.note = err.what();
          ctx.failed = true;
        }
        table.add(row);
        ctx.progress("  " + std::string(to_string(row.status)) + ": " + row.note);
        if (cudaDeviceSynchronize() != cudaSuccess) context_lost = true;
      } catch (const std::exception& err) {
        result_row row;
        row.experiment = e;
        row.variant = "*";
        row.size = n;
        row.status = row_status::failed;
        row.note = err.what();
        ctx.failed = true;
        table.add(row);
        ctx.progress("  failed: " + row.note);
      }
      if (context_lost) break;
    }
    if (context_lost) {
      std::cerr << "atomics lab: the CUDA context is lost after an error; stopping\n";
      break;
    }
  }

  std::cout << "\n";
  table.print(std::cout);
  int status = ctx.failed || table.any_failed() ? 1 : 0;
  try {
    std::string json_path = options.json_path;
    if (json_path.empty() && !options.plot_path.empty()) json_path = options.plot_path + ".json";
    if (!json_path.empty()) {
      table.write_json(json_path);
      std::cout << "wrote " << json_path << "\n";
    }
    if (!options.csv_path.empty()) {
      table.write_csv(options.csv_path);
      std::cout << "wrote " << options.csv_path << "\n";
    }
    if (!options.plot_path.empty()) {
      std::string command = substitute(options.plot_command, "{json}", shell_quote(json_path));
      command = substitute(command, "{plot}", shell_quote(options.plot_path));
      std::cout.flush();
      if (std::system(command.c_str()) != 0)  // a missing plotter is not a measurement failure
        std::cerr << "atomics lab: warning: plot command failed: " << command << "\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "atomics lab: " << e.what() << "\n";
    status = 1;
  }
  if (status != 0) std::cerr << "atomics lab: some variants FAILED validation or hit CUDA errors (see table)\n";
  return status;
}

}  // namespace canopy::bench
