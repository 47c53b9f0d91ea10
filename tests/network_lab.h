#pragma once
// "Hosts" for the network-fault tests: one network namespace per host, each joined by a veth pair
// to a bridge that lives in a namespace of its own (the switch), so that nothing of this machine's
// own network is touched. A host is cut off by taking its switch port down (its packets are then
// dropped: no FIN, no RST, as when a cable or a switch fails). Everything is named after the test
// process's pid and removed when the lab goes out of scope, with any process still inside the
// namespaces (all started by the test).

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/subprocess.h"

namespace mxrun::testing {

class NetworkLab {
 public:
  // Why namespaces cannot be made here ("" when they can): not root, no `ip`, or a kernel or
  // container that refuses them.
  static std::string Unavailable() {
    if (geteuid() != 0) return "needs root to create network namespaces";
    const std::string probe = "mxft-probe-" + std::to_string(getpid());
    ProcessResult add = Run({"ip", "netns", "add", probe}, {}, std::chrono::seconds(10));
    if (add.exit_code != 0) return "ip netns add failed: " + add.err + add.out;
    ProcessResult veth =
        Run({"ip", "-n", probe, "link", "add", "a0", "type", "veth", "peer", "name", "b0"}, {},
            std::chrono::seconds(10));
    Run({"ip", "netns", "del", probe}, {}, std::chrono::seconds(10));
    if (veth.exit_code != 0) return "veth pairs are refused: " + veth.err;
    return "";
  }

  explicit NetworkLab(int hosts) : prefix_("mxft" + std::to_string(getpid())) {
    try {
      Build(hosts);
    } catch (...) {
      Remove();  // what was made so far
      throw;
    }
  }

  ~NetworkLab() { Remove(); }

  NetworkLab(const NetworkLab&) = delete;
  NetworkLab& operator=(const NetworkLab&) = delete;

  std::string Address(int host) const { return "10.77.0." + std::to_string(host + 1); }
  // `argv` run inside host `host` (ip netns exec execs it: the pid is the program's own).
  std::vector<std::string> In(int host, std::vector<std::string> argv) const {
    std::vector<std::string> full{"ip", "netns", "exec", Host(host)};
    full.insert(full.end(), argv.begin(), argv.end());
    return full;
  }
  // Takes host `host`'s switch port down (a partition) or up again.
  void SetLink(int host, bool up) {
    Ip({"-n", Switch(), "link", "set", Port(host), up ? "up" : "down"});
  }
  // The processes still inside host `host`.
  std::string Pids(int host) const {
    return Run({"ip", "netns", "pids", Host(host)}, {}, std::chrono::seconds(10)).out;
  }
  // The processes left inside host `host` once `timeout` has passed, or none as soon as it is
  // empty: a worker its killed agent's parent-death signal ends is gone a moment later, not at
  // once, and a loaded machine makes that moment long (CI saw one still there).
  std::string PidsLeftAfter(int host, std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string left = Pids(host);
    while (!left.empty() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      left = Pids(host);
    }
    return left;
  }

 private:
  void Build(int hosts) {
    Ip({"netns", "add", Switch()});
    switch_made_ = true;
    Ip({"-n", Switch(), "link", "add", "br0", "type", "bridge"});
    Ip({"-n", Switch(), "link", "set", "br0", "up"});
    for (int i = 0; i < hosts; ++i) {
      const std::string host = Host(i);
      const std::string inside = prefix_ + "h" + std::to_string(i);
      const std::string port = Port(i);
      Ip({"netns", "add", host});
      hosts_.push_back(host);
      Ip({"link", "add", inside, "type", "veth", "peer", "name", port});
      Ip({"link", "set", inside, "netns", host});
      Ip({"link", "set", port, "netns", Switch()});
      Ip({"-n", host, "link", "set", inside, "name", "eth0"});
      Ip({"-n", host, "addr", "add", Address(i) + "/24", "dev", "eth0"});
      Ip({"-n", host, "link", "set", "eth0", "up"});
      Ip({"-n", host, "link", "set", "lo", "up"});
      Ip({"-n", Switch(), "link", "set", port, "master", "br0"});
      Ip({"-n", Switch(), "link", "set", port, "up"});
    }
  }

  void Remove() {
    for (const std::string& host : hosts_) {
      // Whatever the test left running in there (it started all of it) dies with the host.
      ProcessResult pids = Run({"ip", "netns", "pids", host}, {}, std::chrono::seconds(10));
      std::istringstream in(pids.out);
      for (pid_t pid; in >> pid;) kill(pid, SIGKILL);
      Run({"ip", "netns", "del", host}, {}, std::chrono::seconds(10));
    }
    hosts_.clear();
    if (switch_made_) Run({"ip", "netns", "del", Switch()}, {}, std::chrono::seconds(10));
    switch_made_ = false;
  }
  std::string Switch() const { return prefix_ + "-sw"; }
  std::string Host(int i) const { return prefix_ + "-h" + std::to_string(i); }
  std::string Port(int i) const { return prefix_ + "p" + std::to_string(i); }
  static void Ip(std::vector<std::string> args) {
    args.insert(args.begin(), "ip");
    ProcessResult r = Run(args, {}, std::chrono::seconds(10));
    if (r.exit_code != 0) {
      std::string command;
      for (const std::string& a : args) command += a + " ";
      throw std::runtime_error("network lab: " + command + "failed: " + r.err);
    }
  }

  std::string prefix_;
  std::vector<std::string> hosts_;
  bool switch_made_ = false;
};

}  // namespace mxrun::testing
