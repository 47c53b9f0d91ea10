#include "launcher/options.h"

#include <algorithm>
#include <csignal>
#include <cstdlib>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/event_log.h"
#include "agent/numa_binding.h"
#include "common/signal_names.h"
#include "launcher/config_file.h"
#include "launcher/entrypoint.h"
#include "launcher/kubernetes.h"
#include "launcher/nproc.h"
#include "launcher/rendezvous_setup.h"
#include "launcher/slurm.h"

namespace mxrun {
namespace {

// One flag of the command line. Values are kept as text until validation, so that a value from the
// command line and one from the environment or a file are checked by the same code with the same
// messages.
struct Flag {
  std::string name;        // canonical, underscores: "nproc_per_node"
  std::string short_name;  // "-m" or empty
  bool boolean = false;
  std::string help;
  std::string default_value;
  bool file_key = true;    // may be set in a --config file (and is printed by --print-config)
};

// The order of a flag's sources, as --help, --print-config and the Slurm notice state it (options.h
// has the details).
constexpr const char* kPrecedence = "flag > MXRUN_* > PET_* > config file > Slurm or Kubernetes > default";

constexpr const char* kVersion = "mxrun " MXRUN_VERSION;

const std::vector<Flag>& Flags() {
  static const std::vector<Flag> flags = {
      {"nnodes", "", false, "number of nodes, N or MIN:MAX", "1:1"},
      {"nproc_per_node", "", false, "workers per node: an integer, gpu, cpu or auto", "1"},
      {"node_rank", "", false, "rank of this node (static; a request in dynamic mode)", "0"},
      {"master_addr", "", false, "address of the node with rank 0 (static rendezvous)", "127.0.0.1"},
      {"master_port", "", false, "port on master_addr (static rendezvous)", "29500"},
      {"rdzv_backend", "", false, "rendezvous backend: static, c10d, or etcd (etcd-v2)", "static"},
      {"rdzv_endpoint", "", false, "rendezvous endpoint host[:port]", ""},
      {"rdzv_id", "", false, "job id shared by every node", "none"},
      {"rdzv_conf", "", false, "rendezvous settings k=v,k=v", ""},
      {"standalone", "", true, "single node with a private rendezvous on localhost", ""},
      {"max_restarts", "", false, "restarts of the worker group after failures", "0"},
      {"monitor_interval", "", false, "accepted for torchrun compatibility; mxrun is event-driven",
       "0.1"},
      {"role", "", false, "user-defined role of the workers", "default"},
      {"local_addr", "", false, "address this node advertises", ""},
      {"log_dir", "", false, "folder for per-rank, per-attempt log files", ""},
      {"log_format", "", false, "console output: text, or json (one object per line)", "text"},
      {"redirects", "-r", false, "streams sent to log files only: 0-3, or per local rank 0:1,1:2",
       "0"},
      {"tee", "-t", false, "streams sent to log files and the console: 0-3, or 0:1,1:2", "0"},
      {"local_ranks_filter", "", false, "local ranks shown on the console, e.g. 0,1", ""},
      {"signals_to_handle", "", false, "signals forwarded to the workers",
       "SIGTERM,SIGINT,SIGHUP,SIGQUIT"},
      {"term_timeout", "", false, "seconds each worker gets after the stop signal before SIGKILL",
       "30"},
      {"shutdown_timeout", "", false,
       "torchrun 2.x's name for --term_timeout (also TORCH_ELASTIC_SHUTDOWN_TIMEOUT); the two "
       "are one setting and must agree when both are given", ""},
      {"hang_timeout", "", false,
       "seconds a worker that touched MXRUN_HEARTBEAT_FILE may stay silent before it counts as "
       "hung (0: off; default off, 300 for the bundled trainer)", ""},
      {"exit_barrier_timeout", "", false,
       "seconds workers may run on after another worker of the job exited 0 before they count "
       "as hung (0: off)", "300"},
      {"standby_workers", "", false,
       "spare workers per node, started and loaded ahead, that replace a failed rank in an "
       "in-process restart (default 1 for the bundled trainer, else 0)", ""},
      {"prestart", "", true,
       "Python scripts: keep one interpreter per local rank started ahead with torch imported "
       "(the mxrun Python module's mxrun._prestart); a restarted group runs the script in them",
       ""},
      {"virtual_local_rank", "", true,
       "each worker sees only its own GPU: LOCAL_RANK=0 and CUDA_VISIBLE_DEVICES naming its entry "
       "of the agent's list (or its index) (torchrun 2.x)", ""},
      {"numa_binding", "", false,
       "bind each worker's CPUs and memory near its GPU, found with hwloc: node, socket, "
       "exclusive or core-complex (none: no binding)", ""},
      {"log_line_prefix_template", "", false,
       "console line prefix with ${role_name}, ${rank}, ${local_rank}, ${hostname} (also "
       "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE; none: mxrun's \"[n<node> r<rank>] \")", ""},
      {"duplicate_stdout_filters", "", false,
       "stdout lines containing any of these substrings (comma-separated, ',,' for a comma) are "
       "also written to <log folder>/attempt_<N>/filtered_stdout.log", ""},
      {"duplicate_stderr_filters", "", false,
       "the same for stderr lines, into attempt_<N>/filtered_stderr.log", ""},
      {"event_log_handler", "", false,
       "torchelastic's event records (rendezvous, worker starts, failures, restarts): null "
       "(none) or console (JSON on stderr)", "null"},
      {"straggler_factor", "", false,
       "a rank is a straggler when its step time stays above this many times the other ranks' "
       "median (progress reports; the master judges every rank of a multi-node job)", "1.5"},
      {"straggler_steps", "", false,
       "... for this many consecutive steps (0: never judge)", "20"},
      {"exclude_after", "", false,
       "a multi-node job leaves a node out of its next rounds after this many worker failures "
       "there within --exclude_window, while the others meet the minimum of --nnodes (0: never)",
       "2"},
      {"exclude_window", "", false, "... within this many seconds", "3600"},
      {"exclude_backoff", "", false,
       "seconds a node is left out; doubled at each exclusion of the same node; it is admitted "
       "again after", "300"},
      {"health_checks", "", false,
       "check the node before each join (its GPUs through NVML, its folders, --local_addr, "
       "--health_check); an unhealthy node does not join and exits 93: on or off", "on"},
      {"health_check", "", false,
       "a command (sh -c) that checks the node too: exit 0 healthy, else unhealthy (its last "
       "output line says why), as Slurm's HealthCheckProgram", ""},
      {"health_check_timeout", "", false, "seconds --health_check may take (else unhealthy)",
       "60"},
      {"health_check_interval", "", false,
       "also check every this many seconds while the workers run (0: before joins only)", "0"},
      {"health_folders", "", false,
       "folders that must be writable with --health_min_disk free (comma-separated; --log_dir "
       "always is), such as the checkpoint folder", ""},
      {"health_min_disk", "", false, "MiB free needed in those folders", "1024"},
      {"health_min_gpu_free", "", false, "MiB of free memory needed on each GPU", "1024"},
      {"gpu_reclaim_timeout", "", false,
       "before a new group starts on GPUs the last one used, wait at most this many seconds for "
       "the old workers' memory there to be released (NVML; 0: never wait)", "50"},
      {"gpu_reclaim_threshold", "", false,
       "... until each GPU's used memory is at most this many MiB (when no other process is "
       "listed there) and no old worker holds any", "512"},
      {"gpu_reclaim_interval", "", false, "... asking NVML every this many seconds", "2"},
      {"do_not_requeue_exit_code", "", false,
       "exit with this code, not 1, when every attempt failed the same way (same exit code and "
       "error): a scheduler should not requeue the job (0: exit 1 as for any failure)", "93"},
      {"straggler_restart", "", true,
       "restart the worker group when a rank is named a straggler (spends a restart; default: "
       "only name it)", ""},
      {"metrics_port", "", false,
       "serve Prometheus metrics on this port (0: a free one, printed; empty: off)", ""},
      {"metrics_bind_all", "", true,
       "the metrics endpoint listens on every interface (default: the node's --local_addr, else "
       "127.0.0.1)", ""},
      {"metrics_tls", "", true,
       "serve the metrics over HTTPS with the job's certificates (--rdzv_conf cert, key, "
       "cacert): scrapers must present a certificate from the job's CA", ""},
      {"logs_specs", "", false,
       "accepted for torchrun compatibility with its default only: mxrun cannot load Python entry "
       "points (use --log_dir, --redirects, --tee, --log_format)", ""},
      {"start_method", "", false, "accepted for torchrun compatibility (spawn, fork, forkserver)",
       "spawn"},
      {"module", "-m", true, "run the entrypoint as a Python module (python -m)", ""},
      {"no_python", "", true, "run the entrypoint as a program, without python", ""},
      {"run_path", "", true, "run the entrypoint as a Python script path (as torchrun)", ""},
      {"config", "", false, "TOML file: flags as keys, plus entrypoint and args", "", false},
      {"print_config", "", true,
       "check the configuration as a launch would, then print it with each value's source", "",
       false},
      {"print_completion", "", false,
       "print a completion script for this shell (bash or zsh) to stdout and exit (torchrun 2.14)",
       "", false},
  };
  return flags;
}

const Flag& FlagNamed(absl::string_view name) {
  for (const Flag& flag : Flags()) {
    if (flag.name == name) return flag;
  }
  std::abort();  // a name spelled wrong in this file
}

std::string Dashed(absl::string_view name) { return absl::StrReplaceAll(name, {{"_", "-"}}); }

// MASTER_ADDR and MASTER_PORT as set by Kubeflow's PyTorchJob (and many launch scripts) stand in for
// --master_addr and --master_port.
const char* PlainEnvName(absl::string_view name) {
  if (name == "master_addr") return "MASTER_ADDR";
  if (name == "master_port") return "MASTER_PORT";
  if (name == "shutdown_timeout") return "TORCH_ELASTIC_SHUTDOWN_TIMEOUT";  // torchrun 2.x
  if (name == "log_line_prefix_template") return "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE";
  return nullptr;
}

// Keys a configuration file may hold beyond the flags: what to run.
constexpr const char* kEntrypointKey = "entrypoint";
constexpr const char* kArgsKey = "args";

// A flag's value and where it came from, for error messages.
struct Value {
  std::string text;
  std::string source;  // "--nproc_per_node", "MXRUN_..."/"PET_...", "FILE:LINE: key" or "default"
  bool given = false;
};

absl::Status Invalid(const Value& value, absl::string_view what, absl::string_view accepted) {
  return absl::InvalidArgumentError(absl::StrCat(value.source, "='", value.text, "' is not valid: ",
                                                 what, accepted.empty() ? "" : "; accepted: ",
                                                 accepted));
}

absl::StatusOr<int> ToInt(const Value& value, int min, int max, absl::string_view accepted) {
  int number = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(value.text), &number)) {
    return Invalid(value, "not an integer", accepted);
  }
  if (number < min || number > max) return Invalid(value, "out of range", accepted);
  return number;
}

absl::StatusOr<double> ToSeconds(const Value& value) {
  double number = 0;
  if (!absl::SimpleAtod(absl::StripAsciiWhitespace(value.text), &number) || number < 0 ||
      number > 1e7) {
    return Invalid(value, "not a number of seconds", "a number >= 0");
  }
  return number;
}

bool ToBool(const Value& value) {
  std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(value.text));
  return lower == "1" || lower == "true" || lower == "yes" || lower == "on";
}

// --print-config: the effective configuration as TOML (usable as a --config file), with the
// source of each value.
std::string FormatEffectiveConfig(const std::map<std::string, Value>& values,
                                  const std::vector<std::string>& command,
                                  const std::string& command_source) {
  auto quote = [](const std::string& text) {  // a TOML basic string, as config_file.cc reads it
    return absl::StrCat("\"",
                        absl::StrReplaceAll(text, {{"\\", "\\\\"},
                                                   {"\"", "\\\""},
                                                   {"\n", "\\n"},
                                                   {"\t", "\\t"}}),
                        "\"");
  };
  std::string out =
      absl::StrCat("# mxrun's effective configuration (precedence: ", kPrecedence, ")\n");
  for (const Flag& flag : Flags()) {
    if (!flag.file_key) continue;
    const Value& v = values.at(flag.name);
    const std::string text = flag.boolean ? (ToBool(v) ? "true" : "false") : quote(v.text);
    absl::StrAppend(&out, flag.name, " = ", text, "  # ", v.source, "\n");
  }
  if (!command.empty()) {
    absl::StrAppend(&out, kEntrypointKey, " = ", quote(command.front()), "  # ", command_source,
                    "\n", kArgsKey, " = [");
    for (std::size_t i = 1; i < command.size(); ++i) {
      absl::StrAppend(&out, i > 1 ? ", " : "", quote(command[i]));
    }
    absl::StrAppend(&out, "]\n");
  }
  return out;
}

}  // namespace

std::vector<FlagDescription> DescribeLaunchFlags() {
  std::vector<FlagDescription> out;
  for (const Flag& f : Flags()) {
    out.push_back({f.name, f.short_name, !f.boolean, f.help, f.default_value});
  }
  return out;
}

absl::StatusOr<NodeRange> ParseNodeRange(absl::string_view text) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  NodeRange range;
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "--nnodes='", text, "' is not valid; accepted: N or MIN:MAX with 0 < MIN <= MAX"));
  };
  if (parts.size() == 1) {
    if (!absl::SimpleAtoi(parts[0], &range.min)) return bad();
    range.max = range.min;
  } else if (parts.size() == 2) {
    if (!absl::SimpleAtoi(parts[0], &range.min) || !absl::SimpleAtoi(parts[1], &range.max)) {
      return bad();
    }
  } else {
    return bad();
  }
  if (range.min <= 0 || range.min > range.max) return bad();
  return range;
}

absl::StatusOr<std::vector<std::string>> ParseFilterList(absl::string_view text) {
  std::vector<std::string> filters;
  if (text.empty()) return filters;
  // torchrun's comma_separated_list: ",," is a literal comma (read left to right), nothing is
  // stripped. Scanned directly: a placeholder byte would turn any such byte in a filter into ','.
  std::string item;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i + 1 < text.size() && text[i] == ',' && text[i + 1] == ',') {
      item.push_back(',');
      ++i;
    } else if (i < text.size() && text[i] != ',') {
      item.push_back(text[i]);
    } else {
      if (item.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "'", text, "' has an empty filter, which would match every line; accepted: substrings "
            "separated by ',' (',,' for a comma itself), e.g. 'loss,error'"));
      }
      filters.push_back(std::move(item));
      item.clear();
    }
  }
  return filters;
}

absl::StatusOr<std::map<std::string, std::string>> ParseRdzvConf(absl::string_view text) {
  std::map<std::string, std::string> conf;
  if (absl::StripAsciiWhitespace(text).empty()) return conf;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    std::string key(absl::StripAsciiWhitespace(kv.first));
    if (key.empty() || item.find('=') == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--rdzv_conf='", text, "' is not valid: '", item, "' is not key=value"));
    }
    conf[key] = std::string(absl::StripAsciiWhitespace(kv.second));
  }
  return conf;
}

absl::StatusOr<ParseResult> ParseLaunchOptions(int argc, const char* const* argv,
                                               const std::map<std::string, std::string>& env) {
  CLI::App app{absl::StrCat(
                   "mxrun: a torchrun-compatible launcher for distributed PyTorch training.\n"
                   "Usage: mxrun [options] ENTRYPOINT [ARGS...]   (ENTRYPOINT: script.py, -m module, "
                   "--no_python program, or 'train' for the bundled trainer)\n"
                   "Every flag can also be set as MXRUN_<FLAG> or PET_<FLAG> in the environment "
                   "(MXRUN_NPROC_PER_NODE=4) or in a --config file; precedence: ",
                   kPrecedence, "."),
               "mxrun"};
  app.prefix_command();
  app.set_version_flag("--version", kVersion);
  std::map<std::string, std::string> cli_text;
  std::map<std::string, bool> cli_flag;
  for (const Flag& flag : Flags()) {
    std::string names = absl::StrCat("--", flag.name);
    if (Dashed(flag.name) != flag.name) absl::StrAppend(&names, ",--", Dashed(flag.name));
    if (!flag.short_name.empty()) absl::StrAppend(&names, ",", flag.short_name);
    std::string help = absl::StrCat(flag.help, flag.default_value.empty() ? "" : " (default ",
                                    flag.default_value, flag.default_value.empty() ? "" : ")");
    if (flag.boolean) {
      app.add_flag(names, cli_flag[flag.name], help);
    } else {
      app.add_option(names, cli_text[flag.name], help);
    }
  }
  std::vector<std::string> args;
  for (int i = argc - 1; i > 0; --i) args.emplace_back(argv[i]);  // CLI11 wants them reversed
  ParseResult result;
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp&) {
    result.help_text = app.help();
    return result;
  } catch (const CLI::CallForVersion&) {
    result.help_text = absl::StrCat(kVersion, "\n");
    return result;
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.what());
  }

  // A flag's value from the command line or the environment, the sources above a configuration
  // file in the precedence of options.h; nullopt when none of them gives it.
  auto from_command_line_or_env = [&](const Flag& flag) -> std::optional<Value> {
    const std::string option = absl::StrCat("--", flag.name);
    if (app.count(option) > 0) {
      return Value{flag.boolean ? (cli_flag[flag.name] ? "1" : "0") : cli_text[flag.name], option,
                   true};
    }
    const std::string upper = absl::AsciiStrToUpper(flag.name);
    for (const std::string& name : {absl::StrCat("MXRUN_", upper), absl::StrCat("PET_", upper)}) {
      if (auto it = env.find(name); it != env.end()) return Value{it->second, name, true};
    }
    if (const char* plain = PlainEnvName(flag.name)) {
      if (auto it = env.find(plain); it != env.end() && !it->second.empty()) {
        return Value{it->second, plain, true};
      }
    }
    return std::nullopt;
  };

  // The configuration file, when one is named.
  std::optional<ConfigFile> file;
  if (std::optional<Value> path = from_command_line_or_env(FlagNamed("config"));
      path && !path->text.empty()) {
    absl::StatusOr<ConfigFile> read = ReadConfigFile(path->text);
    if (!read.ok()) return read.status();
    file = std::move(*read);
  }
  std::map<std::string, const ConfigEntry*> file_entries;
  if (file) {
    for (const ConfigEntry& entry : file->entries) {
      const bool is_flag = std::any_of(Flags().begin(), Flags().end(), [&](const Flag& f) {
        return f.file_key && f.name == entry.key;
      });
      auto where = absl::StrCat(file->path, ":", entry.line, ": ");
      if (!is_flag && entry.key != kEntrypointKey && entry.key != kArgsKey) {
        std::string accepted;
        for (const Flag& f : Flags()) {
          if (f.file_key) absl::StrAppend(&accepted, f.name, ", ");
        }
        return absl::InvalidArgumentError(absl::StrCat(where, "unknown key '", entry.key,
                                                       "'; accepted: ", accepted, kEntrypointKey,
                                                       ", ", kArgsKey));
      }
      if (entry.is_array != (entry.key == kArgsKey)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, "'", entry.key, "' ",
            entry.is_array ? "takes a single value, not an array"
                           : "is a list of strings: args = [\"--lr\", \"0.1\"]"));
      }
      file_entries[entry.key] = &entry;
    }
  }

  // Resolve each flag in the precedence of options.h (Slurm below).
  std::map<std::string, Value> values;
  for (const Flag& flag : Flags()) {
    std::optional<Value> value = from_command_line_or_env(flag);
    if (!value) {
      if (auto it = file_entries.find(flag.name); it != file_entries.end()) {
        const ConfigEntry& entry = *it->second;
        value = Value{entry.values.front(),
                      absl::StrCat(file->path, ":", entry.line, ": ", flag.name), true};
        if (flag.boolean) {
          if (value->text != "true" && value->text != "false") {
            return Invalid(*value, "not a boolean", "true or false");
          }
          value->text = value->text == "true" ? "1" : "0";
        }
      } else {
        value = Value{flag.default_value, "default", false};
      }
    }
    values[flag.name] = std::move(*value);
  }

  // Under Slurm, flags that no other source gives come from SLURM_* (not for --standalone jobs,
  // and the rendezvous only when none of its flags was given).
  // Likewise in a pod of a Kubernetes Indexed Job (kubernetes.h), when not under Slurm.
  const bool rendezvous_given = values["rdzv_backend"].given || values["rdzv_endpoint"].given ||
                                values["master_addr"].given;
  auto fill_from = [&](const std::map<std::string, std::string>& flags, const std::string& source,
                       const std::string& what) {
    std::string filled;
    for (const auto& [name, text] : flags) {
      Value& value = values[name];
      if (value.given) continue;
      if ((name == "rdzv_backend" || name == "rdzv_endpoint") && rendezvous_given) continue;
      value = Value{text, absl::StrCat("--", name, " (from ", source, ")"), true};
      absl::StrAppend(&filled, " --", name, "=", text);
    }
    if (!filled.empty()) {
      result.notices.push_back(
          absl::StrCat(what, ": using", filled, " (precedence: ", kPrecedence, ")"));
    }
  };
  if (!ToBool(values["standalone"])) {
    absl::StatusOr<std::optional<SlurmDefaults>> slurm = DetectSlurm(env);
    if (!slurm.ok()) return slurm.status();
    if (*slurm) {
      fill_from((*slurm)->flags, "Slurm", absl::StrCat("Slurm job ", (*slurm)->job_id));
    } else if (env.count("JOB_COMPLETION_INDEX") != 0 && !rendezvous_given) {
      if (!values["nnodes"].given) {
        return absl::InvalidArgumentError(
            "in a pod of a Kubernetes Indexed Job (JOB_COMPLETION_INDEX is set): give --nnodes "
            "(or PET_NNODES in the pod template) as the Job's parallelism; a pod cannot see it");
      }
      absl::StatusOr<std::optional<IndexedJobDefaults>> indexed = DetectIndexedJob(env);
      if (!indexed.ok()) return indexed.status();
      if (*indexed) {
        fill_from((*indexed)->flags, "Kubernetes",
                  absl::StrCat("Kubernetes Indexed Job ", (*indexed)->job_name));
      }
    }
  }

  LaunchOptions o;
  absl::StatusOr<NodeRange> nnodes = ParseNodeRange(values["nnodes"].text);
  if (!nnodes.ok()) return nnodes.status();
  o.nnodes = *nnodes;

  o.nproc_per_node = std::string(absl::StripAsciiWhitespace(values["nproc_per_node"].text));
  {
    int n = 0;
    const bool numeric = absl::SimpleAtoi(o.nproc_per_node, &n);
    if ((numeric && (n < 1 || n > 4096)) ||
        (!numeric && o.nproc_per_node != "gpu" && o.nproc_per_node != "cpu" &&
         o.nproc_per_node != "auto")) {
      return Invalid(values["nproc_per_node"], "not a worker count",
                     "an integer from 1 to 4096, 'gpu', 'cpu' or 'auto'");
    }
  }
  auto to_int = [&](const char* name, int min, int max, const char* accepted,
                    int& out) -> absl::Status {
    absl::StatusOr<int> v = ToInt(values[name], min, max, accepted);
    if (!v.ok()) return v.status();
    out = *v;
    return absl::OkStatus();
  };
  if (auto s = to_int("node_rank", 0, 1 << 20, "an integer >= 0", o.node_rank); !s.ok()) return s;
  o.node_rank_given = values["node_rank"].given;
  if (auto s = to_int("master_port", 0, 65535, "a TCP port 0-65535", o.master_port); !s.ok()) {
    return s;
  }
  if (auto s = to_int("max_restarts", 0, 1 << 20, "an integer >= 0", o.max_restarts); !s.ok()) {
    return s;
  }
  if (!absl::StripAsciiWhitespace(values["standby_workers"].text).empty()) {
    int standby = 0;
    if (auto s = to_int("standby_workers", 0, 64, "an integer from 0 to 64", standby); !s.ok()) {
      return s;
    }
    o.standby_workers = standby;
  }
  o.master_addr = values["master_addr"].text;
  if (o.master_addr.empty()) return Invalid(values["master_addr"], "empty", "a host name or IP");

  o.rdzv_backend = absl::AsciiStrToLower(values["rdzv_backend"].text);
  // torchrun's etcd-v2 spelling: the same etcd, spoken to through its v3 API.
  if (o.rdzv_backend == "etcd-v2") o.rdzv_backend = "etcd";
  if (o.rdzv_backend != "static" && o.rdzv_backend != "c10d" && o.rdzv_backend != "etcd") {
    return Invalid(values["rdzv_backend"], "unknown backend", "static, c10d, etcd or etcd-v2");
  }
  // torchrun 2.13 warns that a dynamic backend ignores a non-zero --node_rank. mxrun takes it as a
  // request instead, and says so; not for the rank Slurm gives, which every Slurm job has.
  const Value& node_rank = values["node_rank"];
  if (node_rank.given && o.node_rank != 0 && o.rdzv_backend != "static" &&
      !absl::EndsWith(node_rank.source, "(from Slurm)") &&
      !absl::EndsWith(node_rank.source, "(from Kubernetes)")) {
    result.warnings.push_back(absl::StrCat(
        node_rank.source, "=", o.node_rank, " with --rdzv_backend=", o.rdzv_backend,
        ": torchrun uses a node rank only for static rendezvous and ignores it here; mxrun takes "
        "it as a request, granted when that rank is free in the round"));
  }
  o.rdzv_endpoint = values["rdzv_endpoint"].text;
  o.rdzv_endpoint_from_slurm = absl::EndsWith(values["rdzv_endpoint"].source, "(from Slurm)");
  o.rdzv_id = values["rdzv_id"].text;
  absl::StatusOr<std::map<std::string, std::string>> conf =
      ParseRdzvConf(values["rdzv_conf"].text);
  if (!conf.ok()) return conf.status();
  o.rdzv_conf = *conf;
  o.standalone = ToBool(values["standalone"]);
  // torchrun 2.12+: a one-node job that names neither a rendezvous endpoint nor a master port runs
  // as --standalone does, so two such jobs on one host never share port 29500 (three at once mixed
  // their ranks and one exited 0 with a wrong sum, 2026-11-24). Its --rdzv_id is replaced by a
  // random one, as torchrun does.
  o.standalone_implied = !o.standalone && o.rdzv_backend == "static" && o.rdzv_endpoint.empty() &&
                         !values["master_port"].given && o.nnodes.max == 1;

  absl::StatusOr<double> monitor = ToSeconds(values["monitor_interval"]);
  if (!monitor.ok()) return monitor.status();
  o.monitor_interval = *monitor;
  absl::StatusOr<double> term = ToSeconds(values["term_timeout"]);
  if (!term.ok()) return term.status();
  o.term_timeout_seconds = *term;
  o.term_timeout_given = values["term_timeout"].given || values["shutdown_timeout"].given;
  // One grace period, two names: torchrun 2.x's --shutdown_timeout stands in for --term_timeout;
  // given both (from any sources), they must say the same.
  if (values["shutdown_timeout"].given) {
    absl::StatusOr<double> shutdown = ToSeconds(values["shutdown_timeout"]);
    if (!shutdown.ok()) return shutdown.status();
    if (values["term_timeout"].given && *shutdown != *term) {
      return absl::InvalidArgumentError(absl::StrCat(
          values["shutdown_timeout"].source, "='", values["shutdown_timeout"].text, "' and ",
          values["term_timeout"].source, "='", values["term_timeout"].text,
          "' disagree: they are one setting (the grace period before SIGKILL); give one"));
    }
    o.term_timeout_seconds = *shutdown;
  }
  if (!absl::StripAsciiWhitespace(values["hang_timeout"].text).empty()) {
    absl::StatusOr<double> hang = ToSeconds(values["hang_timeout"]);
    if (!hang.ok()) return hang.status();
    o.hang_timeout_seconds = *hang;
  }
  absl::StatusOr<double> barrier = ToSeconds(values["exit_barrier_timeout"]);
  if (!barrier.ok()) return barrier.status();
  o.exit_barrier_timeout_seconds = *barrier;

  // torchrun 2.x loads a Python class from the `torchrun.logs_specs` entry-point group here; a C++
  // launcher cannot, so only the default is accepted, and anything else says what to use instead.
  if (!absl::StripAsciiWhitespace(values["logs_specs"].text).empty()) {
    return Invalid(values["logs_specs"], "mxrun cannot load torchrun.logs_specs entry points "
                   "(Python classes)",
                   "nothing (the default); for log files and streams use --log_dir, "
                   "-r/--redirects, -t/--tee, --local_ranks_filter or --log_format=json");
  }
  o.role = values["role"].text;
  if (o.role.empty()) return Invalid(values["role"], "empty", "a non-empty name");
  o.local_addr = values["local_addr"].text;
  o.log_dir = values["log_dir"].text;
  o.log_format = absl::AsciiStrToLower(values["log_format"].text);
  if (o.log_format != "text" && o.log_format != "json") {
    return Invalid(values["log_format"], "unknown format", "text or json");
  }

  for (const char* name : {"redirects", "tee"}) {
    absl::StatusOr<PerRankStd> parsed = ParsePerRankStd(values[name].text);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(values[name].source, ": ", parsed.status().message()));
    }
    (absl::string_view(name) == "tee" ? o.tee : o.redirects) = *parsed;
  }
  absl::StatusOr<std::set<int>> filter = ParseLocalRanksFilter(values["local_ranks_filter"].text);
  if (!filter.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(values["local_ranks_filter"].source, ": ", filter.status().message()));
  }
  o.local_ranks_filter = *filter;

  o.virtual_local_rank = ToBool(values["virtual_local_rank"]);
  if (o.virtual_local_rank && o.standby_workers.value_or(0) > 0) {
    return Invalid(values["standby_workers"],
                   "with --virtual_local_rank a worker's GPU is fixed when it starts, and a "
                   "standby starts before it knows which rank (and GPU) it will take",
                   "0 with --virtual_local_rank");
  }
  o.numa_binding = absl::AsciiStrToLower(absl::StripAsciiWhitespace(values["numa_binding"].text));
  if (o.numa_binding == "none") o.numa_binding.clear();
  if (!o.numa_binding.empty() && !ParseNumaMode(o.numa_binding)) {
    return Invalid(values["numa_binding"], "unknown mode",
                   "node, socket, exclusive or core-complex (or none)");
  }
  o.log_line_prefix_template = values["log_line_prefix_template"].text;
  for (const char* name : {"duplicate_stdout_filters", "duplicate_stderr_filters"}) {
    absl::StatusOr<std::vector<std::string>> filters = ParseFilterList(values[name].text);
    if (!filters.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(values[name].source, "=", filters.status().message()));
    }
    (absl::string_view(name) == "duplicate_stdout_filters" ? o.duplicate_stdout_filters
                                                           : o.duplicate_stderr_filters) =
        std::move(*filters);
  }
  {
    double factor = 0;
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(values["straggler_factor"].text), &factor) ||
        !(factor > 1.0) || factor > 1000) {
      return Invalid(values["straggler_factor"], "not a factor above 1",
                     "a number above 1 and at most 1000, such as 1.5");
    }
    o.straggler_factor = factor;
    absl::StatusOr<int> steps =
        ToInt(values["straggler_steps"], 0, 1'000'000, "0 (never) to 1000000 steps");
    if (!steps.ok()) return steps.status();
    o.straggler_steps = *steps;
  }
  if (!absl::StripAsciiWhitespace(values["metrics_port"].text).empty()) {
    absl::StatusOr<int> port =
        ToInt(values["metrics_port"], 0, 65535, "a port from 1 to 65535, or 0 for a free one");
    if (!port.ok()) return port.status();
    o.metrics_port = *port;
  }
  o.metrics_bind_all = ToBool(values["metrics_bind_all"]);
  o.straggler_restart = ToBool(values["straggler_restart"]);
  {
    absl::StatusOr<int> after =
        ToInt(values["exclude_after"], 0, 1000, "0 (never) to 1000 failures");
    if (!after.ok()) return after.status();
    o.exclude_after = *after;
    absl::StatusOr<double> window = ToSeconds(values["exclude_window"]);
    if (!window.ok()) return window.status();
    absl::StatusOr<double> backoff = ToSeconds(values["exclude_backoff"]);
    if (!backoff.ok()) return backoff.status();
    if (*window <= 0 || *backoff <= 0 || *backoff > 7 * 86400) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--exclude_window=", values["exclude_window"].text, " --exclude_backoff=",
          values["exclude_backoff"].text, " are not valid; accepted: a window above 0 s and a "
          "back-off above 0 s, at most a week (604800)"));
    }
    o.exclude_window_s = *window;
    o.exclude_backoff_s = *backoff;
  }
  {
    absl::StatusOr<double> timeout = ToSeconds(values["gpu_reclaim_timeout"]);
    if (!timeout.ok()) return timeout.status();
    absl::StatusOr<int> threshold = ToInt(values["gpu_reclaim_threshold"], 0, 10'000'000,
                                          "0 to 10000000 MiB");
    if (!threshold.ok()) return threshold.status();
    absl::StatusOr<double> interval = ToSeconds(values["gpu_reclaim_interval"]);
    if (!interval.ok()) return interval.status();
    if (*interval < 0.01 || *interval > 60) {
      return Invalid(values["gpu_reclaim_interval"], "out of range", "0.01 to 60 seconds");
    }
    o.gpu_reclaim_timeout_s = *timeout;
    const std::string on = absl::AsciiStrToLower(absl::StripAsciiWhitespace(values["health_checks"].text));
    if (on != "on" && on != "off") {
      return Invalid(values["health_checks"], "neither on nor off", "on or off");
    }
    o.health_checks = on == "on";
    o.health_check = std::string(absl::StripAsciiWhitespace(values["health_check"].text));
    absl::StatusOr<double> check_timeout = ToSeconds(values["health_check_timeout"]);
    if (!check_timeout.ok()) return check_timeout.status();
    if (*check_timeout <= 0) {
      return Invalid(values["health_check_timeout"], "not above 0", "seconds above 0");
    }
    absl::StatusOr<double> check_interval = ToSeconds(values["health_check_interval"]);
    if (!check_interval.ok()) return check_interval.status();
    o.health_check_timeout_s = *check_timeout;
    o.health_check_interval_s = *check_interval;
    for (absl::string_view folder :
         absl::StrSplit(values["health_folders"].text, ',', absl::SkipWhitespace())) {
      o.health_folders.emplace_back(absl::StripAsciiWhitespace(folder));
    }
    absl::StatusOr<int> disk = ToInt(values["health_min_disk"], 0, 100'000'000, "0 to 100000000 MiB");
    if (!disk.ok()) return disk.status();
    absl::StatusOr<int> gpu_free =
        ToInt(values["health_min_gpu_free"], 0, 10'000'000, "0 to 10000000 MiB");
    if (!gpu_free.ok()) return gpu_free.status();
    o.health_min_disk_mib = *disk;
    o.health_min_gpu_free_mib = *gpu_free;
    o.gpu_reclaim_threshold_mib = *threshold;
    o.gpu_reclaim_interval_s = *interval;
  }
  {
    absl::StatusOr<int> code = ToInt(values["do_not_requeue_exit_code"], 0, 125,
                                     "0 (off) or an exit code from 4 to 125");
    if (!code.ok()) return code.status();
    if (*code >= 1 && *code <= 3) {
      return Invalid(values["do_not_requeue_exit_code"], "taken by another meaning (1 failed, 2 "
                     "usage, 3 rendezvous)", "0 (off) or an exit code from 4 to 125");
    }
    o.do_not_requeue_exit_code = *code;
  }
  if (o.straggler_restart && o.straggler_steps == 0) {
    return absl::InvalidArgumentError(
        "--straggler_restart needs stragglers to be judged: --straggler_steps must be above 0");
  }
  o.metrics_tls = ToBool(values["metrics_tls"]);
  if ((o.metrics_bind_all || o.metrics_tls) && o.metrics_port < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        o.metrics_bind_all ? "--metrics_bind_all" : "--metrics_tls",
        " needs --metrics_port (the metrics endpoint is off without it)"));
  }
  o.event_log_handler = absl::AsciiStrToLower(absl::StripAsciiWhitespace(
      values["event_log_handler"].text));
  if (!IsEventLogHandler(o.event_log_handler)) {
    return Invalid(values["event_log_handler"],
                   "unknown event handler (mxrun has torchelastic's built-in ones, and cannot load "
                   "Python handlers registered at run time)",
                   "null, console");
  }

  for (absl::string_view name : absl::StrSplit(values["signals_to_handle"].text, ',',
                                              absl::SkipWhitespace())) {
    std::optional<int> signo = ParseSignal(name);
    if (!signo || *signo == SIGKILL || *signo == SIGSTOP || *signo == SIGCHLD) {
      return Invalid(values["signals_to_handle"], absl::StrCat("'", name, "' cannot be handled"),
                     "signal names or numbers such as SIGTERM,SIGINT (not SIGKILL, SIGSTOP, "
                     "SIGCHLD)");
    }
    o.signals_to_handle.insert(*signo);
  }
  o.signals_to_handle_text = values["signals_to_handle"].text;

  const bool module = ToBool(values["module"]);
  const bool no_python = ToBool(values["no_python"]);
  if (module && no_python) {
    return absl::InvalidArgumentError(
        "--no_python and -m/--module cannot be used together: -m runs a Python module, "
        "--no_python runs a program without Python");
  }
  if (ToBool(values["run_path"]) && (module || no_python)) {
    return absl::InvalidArgumentError(
        "--run_path cannot be combined with -m/--module or --no_python");
  }

  std::vector<std::string> rest = app.remaining();
  if (!rest.empty() && rest.front() == "--") rest.erase(rest.begin());
  std::string entrypoint_source = "command line";
  if (rest.empty() && file_entries.count(kEntrypointKey) > 0) {
    const ConfigEntry& entry = *file_entries[kEntrypointKey];
    rest.push_back(entry.values.front());
    entrypoint_source = absl::StrCat(file->path, ":", entry.line);
    if (auto it = file_entries.find(kArgsKey); it != file_entries.end()) {
      rest.insert(rest.end(), it->second->values.begin(), it->second->values.end());
    }
  }
  const bool print_config = ToBool(values["print_config"]);
  if (rest.empty() && !print_config) {  // --print-config may show a configuration without one
    return absl::InvalidArgumentError(
        "no entrypoint given; usage: mxrun [options] ENTRYPOINT [ARGS...] "
        "(a script.py, -m module, --no_python program, or 'train')");
  }
  if (!rest.empty()) {
    if (absl::StartsWith(rest.front(), "-") && rest.front() != "-") {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown flag '", rest.front(), "' before the entrypoint; run 'mxrun --help' for the "
          "flags mxrun accepts"));
    }
    o.entrypoint = rest.front();
    o.entrypoint_args.assign(rest.begin() + 1, rest.end());
    if (module) {
      o.entrypoint_kind = EntrypointKind::kPythonModule;
    } else if (no_python) {
      o.entrypoint_kind = EntrypointKind::kExecutable;
    } else if (o.entrypoint == "train") {
      o.entrypoint_kind = EntrypointKind::kBundledTrainer;
    } else {
      o.entrypoint_kind = EntrypointKind::kPythonScript;
    }
  }
  o.prestart = ToBool(values["prestart"]);
  if (o.prestart && o.entrypoint_kind != EntrypointKind::kPythonScript &&
      o.entrypoint_kind != EntrypointKind::kPythonModule) {
    return Invalid(values["prestart"], "it pre-starts Python interpreters",
                   "a Python script or -m module as the entrypoint (not --no_python or 'train')");
  }
  if (o.prestart && o.standby_workers.value_or(0) > 0) {
    return Invalid(values["standby_workers"],
                   "with --prestart the standbys are the pre-started interpreters, one per "
                   "local rank",
                   "--prestart, or --standby_workers with a script that uses mxrun.run");
  }
  if (!print_config) {
    result.options = std::move(o);
    return result;
  }

  // --print-config: the configuration is checked as a launch checks it (all cheap, no network).
  // What depends on this machine, its GPUs and the entrypoint on its disk, is a warning: a
  // configuration may be printed on another machine than the one it is for.
  if (absl::StatusOr<RendezvousSettings> rendezvous = CheckRendezvousFlags(o, env);
      !rendezvous.ok()) {
    return rendezvous.status();
  }
  result.help_text = FormatEffectiveConfig(values, rest, entrypoint_source);
  const std::string on_this_machine = "a launch on this machine would fail: ";
  if (absl::StatusOr<int> nproc = ResolveNprocPerNode(o.nproc_per_node, env); !nproc.ok()) {
    result.warnings.push_back(absl::StrCat(on_this_machine, nproc.status().message()));
  }
  if (!o.entrypoint.empty()) {
    if (absl::StatusOr<WorkerCommand> command = BuildWorkerCommand(o, env, SelfDir());
        !command.ok()) {
      result.warnings.push_back(absl::StrCat(on_this_machine, command.status().message()));
    }
  }
  return result;
}

}  // namespace mxrun
