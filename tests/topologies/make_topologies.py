#!/usr/bin/env python3
"""Writes the hwloc XML topologies of the NUMA binding tests (run once; the XML files are kept).

Each is hwloc's own synthetic topology (lstopo-no-graphics -i "<description>" out.xml), with PUs
numbered as on Intel servers (a core's second hyperthread is CPU N + number of cores), plus NVIDIA
GPUs (PCI class 0302, vendor 10de) and one network card attached where a real machine has them: to
the package, or to the group of cores of one NUMA node. Usage: make_topologies.py [OUT_DIR]
"""
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

# name: (synthetic description without PU indexes, cores, attach type, {ordinal: [gpu bus ids]})
TOPOLOGIES = {
    # Two sockets, one NUMA node each, four GPUs per socket (a DGX-like 8-GPU server).
    "two_socket_8gpu": ("pack:2 [numa] l3:2 core:8", 32, "Package",
                        {0: ["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0"],
                         1: ["0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"]}),
    # Two sockets split in two NUMA nodes each (sub-NUMA clustering), two GPUs per NUMA node.
    "snc_8gpu": ("pack:2 l3:1 group:2 [numa] core:8", 32, "Group",
                 {0: ["0000:18:00.0", "0000:2a:00.0"], 1: ["0000:3a:00.0", "0000:5d:00.0"],
                  2: ["0000:9a:00.0", "0000:ab:00.0"], 3: ["0000:ba:00.0", "0000:db:00.0"]}),
    # Every GPU on the first socket: exclusive must split that node's cores between them.
    "one_socket_4gpu": ("pack:2 [numa] l3:2 core:4", 16, "Package",
                        {0: ["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0"]}),
    # This test machine's two CPUs as two NUMA nodes with one GPU each, for a real launch.
    "two_cpu_2gpu": ("pack:2 [numa] core:1", 2, "Package",
                     {0: ["0000:18:00.0"], 1: ["0000:9a:00.0"]}),
}


def pu_indexes(cores):
    # Core c has PUs c and c + cores.
    return ",".join(f"{c},{c + cores}" for c in range(cores))


def make(name, description, cores, attach_type, gpus, out_dir):
    synthetic = f"{description} pu:2(indexes={pu_indexes(cores)})"
    if cores == 2:
        synthetic = f"{description} pu:1"
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "raw.xml")
        subprocess.run(["lstopo-no-graphics", "-i", synthetic, "-f", raw], check=True)
        tree = ET.parse(raw)
    root = tree.getroot()
    machine = root.find("object")
    for info in list(machine.findall("info")):
        if info.get("name") == "ProcessName":
            machine.remove(info)
    targets = [o for o in root.iter("object") if o.get("type") == attach_type]
    gp_index = 10000
    bus = 0
    for ordinal, bus_ids in sorted(gpus.items()):
        target = targets[ordinal]
        for bus_id in bus_ids:
            gp_index += 2
            secondary = int(bus_id.split(":")[1], 16)
            bridge = ET.SubElement(target, "object", {
                "type": "Bridge", "gp_index": str(gp_index), "bridge_type": "0-1", "depth": "0",
                "bridge_pci": f"0000:[{secondary:02x}-{secondary:02x}]"})
            ET.SubElement(bridge, "object", {
                "type": "PCIDev", "gp_index": str(gp_index + 1), "pci_busid": bus_id,
                "pci_type": "0302 [10de:2330] [10de:16c1] a1", "pci_link_speed": "0.000000"})
    # A network card on the first target: PCI devices that are not NVIDIA GPUs are ignored.
    bridge = ET.SubElement(targets[0], "object", {
        "type": "Bridge", "gp_index": "20000", "bridge_type": "0-1", "depth": "0",
        "bridge_pci": "0000:[0c-0c]"})
    ET.SubElement(bridge, "object", {
        "type": "PCIDev", "gp_index": "20001", "pci_busid": "0000:0c:00.0",
        "pci_type": "0200 [15b3:1021] [15b3:0023] 00", "pci_link_speed": "0.000000"})
    ET.indent(tree, "  ")
    path = os.path.join(out_dir, f"{name}.xml")
    with open(path, "w") as out:
        out.write('<?xml version="1.0" encoding="UTF-8"?>\n'
                  '<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n')
        out.write(ET.tostring(root, encoding="unicode"))
        out.write("\n")
    print(path)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for name, (description, cores, attach_type, gpus) in TOPOLOGIES.items():
        make(name, description, cores, attach_type, gpus, out_dir)


if __name__ == "__main__":
    main()
