#!/usr/bin/env python3
"""Applies a CDI spec's common edits and one device's to a bundle's
config.json, as containerd's CDI code does: env replaced by key, device
nodes as linux.devices with allow rules, mounts and hooks appended.

--hooks-via GPURUN  the nvidia-cdi-hook hooks name `GPURUN cdi-hook` (the
                    program runc runs when a spec names gpurun)
--ldconfig          update-ldcache becomes an ldconfig hook run in the
                    container's root, as the toolkit's hook does its work

Usage: cdi_apply.py SPEC CONFIG DEVICE [--hooks-via GPURUN] [--ldconfig]
"""
import json
import os
import stat
import sys


def main(argv):
    args = argv[1:]
    gpurun = None
    ldconfig = False
    if "--hooks-via" in args:
        i = args.index("--hooks-via")
        gpurun = args[i + 1]
        del args[i:i + 2]
    if "--ldconfig" in args:
        args.remove("--ldconfig")
        ldconfig = True
    if len(args) != 3:
        sys.exit(__doc__)
    spec_path, config_path, device = args
    spec = json.load(open(spec_path))
    config = json.load(open(config_path))
    edits = [spec.get("containerEdits", {})]
    edits += [d["containerEdits"] for d in spec["devices"] if d["name"] == device]
    rootfs = config["root"]["path"]
    if not os.path.isabs(rootfs):
        rootfs = os.path.join(os.path.dirname(os.path.abspath(config_path)), rootfs)
    env = config["process"].setdefault("env", [])
    linux = config.setdefault("linux", {})
    for e in edits:
        for kv in e.get("env", []):
            key = kv.split("=", 1)[0]
            env[:] = [x for x in env if x.split("=", 1)[0] != key] + [kv]
        for n in e.get("deviceNodes", []):
            rdev = os.stat(n.get("hostPath", n["path"])).st_rdev
            major, minor = os.major(rdev), os.minor(rdev)
            linux.setdefault("devices", []).append(
                {"path": n["path"], "type": "c", "major": major, "minor": minor,
                 "fileMode": 0o666, "uid": 0, "gid": 0})
            linux.setdefault("resources", {}).setdefault("devices", []).append(
                {"allow": True, "type": "c", "major": major, "minor": minor, "access": "rwm"})
        for m in e.get("mounts", []):
            config.setdefault("mounts", []).append(
                {"source": m["hostPath"], "destination": m["containerPath"],
                 "type": "bind", "options": m.get("options", [])})
        for h in e.get("hooks", []):
            hook = {k: v for k, v in h.items() if k != "hookName"}
            sub = hook["args"][1:]
            if ldconfig and sub and sub[0] == "update-ldcache":
                folders = [sub[i + 1] for i, a in enumerate(sub) if a == "--folder"]
                hook = {"path": "/usr/sbin/ldconfig",
                        "args": ["ldconfig", "-r", rootfs, *folders]}
            elif gpurun:
                hook = {"path": gpurun, "args": ["gpurun", "cdi-hook", *sub]}
            config.setdefault("hooks", {}).setdefault(h["hookName"], []).append(hook)
    with open(config_path, "w") as f:
        json.dump(config, f, indent=2)


if __name__ == "__main__":
    main(sys.argv)
