#!/usr/bin/env python3
"""Writes the CDI spec `nvidia-ctk cdi generate` (1.17-1.20) writes for the
fake GPU host, in the form of the toolkit's golden test (generate_test.go),
independently of gpurun: the utility and compute libraries bind-mounted at
their driver-root paths, nvidia-smi in /usr/bin, the device nodes, and the
createContainer hooks naming /usr/bin/nvidia-cdi-hook (absent here).

Usage: toolkit_cdi_spec.py DRIVER_ROOT DEV_DIR OUT
"""
import json
import os
import sys

FOLDER = "/usr/lib/x86_64-linux-gnu/nvidia/current"
VERSION = "535.309.01"
LIBS = ["libnvidia-ml", "libnvidia-cfg", "libcuda", "libcudadebugger",
        "libnvidia-allocator", "libnvidia-nvvm", "libnvidia-ptxjitcompiler"]
OPTIONS = ["ro", "nosuid", "nodev", "rbind", "rprivate"]
HOOK = "/usr/bin/nvidia-cdi-hook"


def main(driver, dev_dir, out):
    mounts = []
    for lib in LIBS:
        in_root = f"{FOLDER}/{lib}.so.{VERSION}"
        host = os.path.join(driver, in_root.lstrip("/"))
        if not os.path.isfile(host):
            sys.exit(f"toolkit_cdi_spec.py: no {host}")
        mounts.append({"hostPath": host, "containerPath": in_root, "options": OPTIONS})
    mounts.append({"hostPath": os.path.join(driver, "usr/lib/nvidia/current/nvidia-smi"),
                   "containerPath": "/usr/bin/nvidia-smi", "options": OPTIONS})

    def hook(*args):
        return {"hookName": "createContainer", "path": HOOK,
                "args": ["nvidia-cdi-hook", *args], "env": ["NVIDIA_CTK_DEBUG=false"]}

    def node(name):
        return {"path": f"/dev/{name}", "hostPath": os.path.join(dev_dir, name)}

    spec = {
        "cdiVersion": "0.5.0",
        "kind": "nvidia.com/gpu",
        "devices": [{"name": str(i), "containerEdits": {"deviceNodes": [node(f"nvidia{i}")]}}
                    for i in (0, 1)],
        "containerEdits": {
            "env": [f"NVIDIA_CTK_LIBCUDA_DIR={FOLDER}", "NVIDIA_VISIBLE_DEVICES=void"],
            "deviceNodes": [node("nvidiactl"), node("nvidia-uvm"), node("nvidia-uvm-tools")],
            "hooks": [
                hook("create-symlinks", "--link", f"libcuda.so.1::{FOLDER}/libcuda.so"),
                hook("enable-cuda-compat", f"--host-driver-version={VERSION}"),
                hook("update-ldcache", "--folder", FOLDER),
                hook("disable-device-node-modification"),
            ],
            "mounts": mounts,
        },
    }
    with open(out, "w") as f:
        json.dump(spec, f, indent=2)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
