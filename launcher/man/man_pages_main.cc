// mxrun-man-pages OUT_DIR DATE: writes mxrun.1 and mxrun-master.1 (and mxrun-multinode.1, which
// points at mxrun.1) into OUT_DIR from the two
// programs' flag tables (launcher/flags/man_page.h), with the prose below around them, and the
// same as Markdown, mxrun.md and mxrun-master.md (launcher/flags/markdown_reference.h), the
// reference pages of the guide's site (scripts/build-docs.sh). The build runs it (target
// man-pages); scripts/install.sh and the Debian package install its manual pages.

#include <cstdio>
#include <fstream>
#include <string>

#include "launcher/flags/man_page.h"
#include "launcher/flags/markdown_reference.h"
#include "launcher/launch_flags/launch_flags.h"
#include "launcher/master/master_flags.h"

namespace mxrun {
namespace {

using Kind = ManBlock::Kind;

ManSection ExitStatus() {
  return {
      "Exit status",
      {{Kind::kTagged, "every worker succeeded", "0"},
       {Kind::kTagged, "workers failed and the restart budget (--max_restarts) is spent", "1"},
       {Kind::kTagged, "a usage or configuration error; the message says what is accepted", "2"},
       {Kind::kTagged, "the rendezvous failed", "3"},
       {Kind::kTagged,
        "every attempt failed the same way (the same exit code and error), or the node is "
        "unhealthy (--health_checks): a scheduler should not requeue the job "
        "(--do_not_requeue_exit_code; 0 exits 1 instead)",
        "93"},
       {Kind::kTagged, "mxrun was stopped by signal N, which it forwarded to the workers first",
        "128+N"}}};
}

ManPageText LauncherText(const std::string& date) {
  ManPageText text;
  text.summary = "torchrun-compatible launcher for distributed PyTorch training";
  text.synopsis = "[OPTIONS] ENTRYPOINT [ARGS...]";
  text.date = date;
  text.before_options = {
      {"Description",
       {{Kind::kParagraph,
         "mxrun starts one elastic agent per node. The agents rendezvous (with each other, with "
         "an mxrun-master, or through etcd), get their ranks, start one worker per process slot "
         "with the environment torchrun gives its workers (RANK, LOCAL_RANK, WORLD_SIZE, "
         "MASTER_ADDR, MASTER_PORT and the others), and restart the group on every node when a "
         "worker or a node fails. It takes torchrun's flags in both spellings, so an unmodified "
         "PyTorch script runs under it."},
        {Kind::kParagraph,
         "ENTRYPOINT is a Python script (run by $PYTHON_EXEC, else python3 on the PATH), -m "
         "MODULE, a "
         "program "
         "with --no_python, or train for the bundled trainer. Its ARGS are passed on unchanged."},
        {Kind::kParagraph,
         "Workers that import the mxrun Python module (or use PyTorch's optimizers: the module's "
         "start hook counts their steps) report progress, which gives goodput, stragglers, hang "
         "detection per step, mxrun status and in-process recovery."},
        {Kind::kTagged,
         "Shows the runs a master holds: rounds, nodes, ranks and restarts (--json for scripts, "
         "--watch to refresh).",
         "mxrun status --rdzv_endpoint=HOST:PORT"}}},
      {"Examples",
       {{Kind::kExample,
         "mxrun --standalone --nproc_per_node=4 train.py --epochs 10\n"
         "mxrun --nnodes=2 --nproc_per_node=gpu --rdzv_backend=c10d \\\n"
         "      --rdzv_endpoint=head:29400 --rdzv_id=exp1 train.py\n"
         "mxrun --config /etc/mxrun/exp1.toml --print-config"}}},
  };
  text.after_options = {
      ExitStatus(),
      {"Files",
       {{Kind::kTagged,
         "One job's settings for mxrun-agent@JOB.service: keys named like the flags, plus "
         "entrypoint and args.",
         "/etc/mxrun/JOB.toml"},
        {Kind::kTagged, "An example job file.", "/etc/mxrun/example.toml"}}},
      {"See also",
       {{Kind::kParagraph,
         "mxrun-master(1), systemctl(1); torchrun's documentation at "
         "https://docs.pytorch.org/docs/stable/elastic/run.html"}}},
  };
  return text;
}

ManPageText MasterText(const std::string& date) {
  ManPageText text;
  text.summary = "rendezvous master for mxrun jobs";
  text.synopsis = "[OPTIONS]";
  text.date = date;
  text.before_options = {
      {"Description",
       {{Kind::kParagraph,
         "mxrun-master serves the rendezvous of many mxrun jobs, keyed by their run id: the agents "
         "of a job connect to it over gRPC (mxrun --rdzv_backend=c10d "
         "--rdzv_endpoint=HOST:PORT), and it gives them their ranks, forms every round and tells "
         "every node when to restart. With --state_dir a restarted master picks up the running "
         "jobs; with --rdzv_backend=etcd several replicas elect one and keep the state in etcd."},
        {Kind::kParagraph,
         "On a head node it runs as the systemd service mxrun-master.service, whose settings go in "
         "/etc/mxrun/master.env (MXRUN_MASTER_ARGS, MXRUN_MASTER_TLS, MXRUN_MASTER_STATE)."}}},
  };
  text.after_options = {
      {"Exit status",
       {{Kind::kTagged, "stopped by SIGTERM or SIGINT", "0"},
        {Kind::kTagged, "a usage or configuration error; the message says what is accepted", "2"},
        {Kind::kTagged, "it could not start serving (for example, its port is taken)", "3"}}},
      {"Files",
       {{Kind::kTagged, "The service's settings.", "/etc/mxrun/master.env"},
        {Kind::kTagged, "The service's state folder (--state_dir).", "/var/lib/mxrun-master"}}},
      {"See also", {{Kind::kParagraph, "mxrun(1), systemctl(1)"}}},
  };
  return text;
}

bool Write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) std::fprintf(stderr, "mxrun-man-pages: cannot write %s\n", path.c_str());
  return static_cast<bool>(out);
}

}  // namespace
}  // namespace mxrun

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: mxrun-man-pages OUT_DIR DATE (YYYY-MM-DD)\n");
    return 2;
  }
  const std::string dir = argv[1];
  const std::string date = argv[2];
  using namespace mxrun;
  // mxrun-multinode is mxrun's networked build, which mxrun hands multi-node jobs to: its page is
  // mxrun's (a .so page, which man follows; a wheel cannot hold a symbolic link).
  const bool ok =
      Write(dir + "/mxrun.1", ManPage(LaunchProgram(), LaunchFlagSpecs(), LauncherText(date))) &&
      Write(dir + "/mxrun-master.1",
            ManPage(MasterProgram(), MasterFlagSpecs(), MasterText(date))) &&
      Write(dir + "/mxrun-multinode.1", ".so man1/mxrun.1\n") &&
      Write(dir + "/mxrun.md", MarkdownReference(LaunchProgram(), LaunchFlagSpecs(),
                                                 LauncherText(date), "mxrun-man-pages")) &&
      Write(dir + "/mxrun-master.md", MarkdownReference(MasterProgram(), MasterFlagSpecs(),
                                                        MasterText(date), "mxrun-man-pages"));
  return ok ? 0 : 1;
}
