#!/usr/bin/env python3
"""The module graph of each crate under crates/ (vendored forks aside) must
have no circle, and in the gpurun binary the layers must point one way:
main -> commands -> cli, runtime; cli -> runtime::context only; runtime
never names cli or commands. In the GPU library each stage names only the
stages before it: formats, roots, inventory, request, plan, apply, cdi,
then the entries (flow, checkpoint, fuzzing). Test modules are left out.
    python3 scripts/ci/check-layers.py"""
import glob
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "crates")


def module_of(src, path):
    parts = os.path.relpath(path, src)[:-3].split(os.sep)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return "::".join(parts)


def without_tests(text):
    return re.sub(r"#\[cfg\(test\)\]\s*mod \w+ \{.*", "", text, flags=re.S)


def graph(src):
    files = {module_of(src, f): f for f in glob.glob(src + "/**/*.rs", recursive=True)}
    edges = {}
    for module, path in files.items():
        text = without_tests(open(path).read())
        paths = []
        for group in re.finditer(r"crate::((?:\w+::)*)\{([^}]*)\}", text):
            paths += [group.group(1) + item.strip() for item in group.group(2).split(",")]
        text = re.sub(r"crate::(?:\w+::)*\{[^}]*\}", "", text)
        paths += re.findall(r"crate::((?:[a-z_0-9]+::)*[a-z_0-9]+)", text)
        targets = set()
        for p in paths:
            parts = [x for x in p.split("::") if x]
            for k in range(len(parts), -1, -1):
                name = "::".join(parts[:k])
                if name in files:
                    targets.add(name)
                    break
        targets.discard(module)
        edges[module] = targets
    return edges


def circles(edges):
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in list(edges):
        if v not in index:
            visit(v)
    return found


def layer(module):
    return module.split("::")[0] if module else "main"


ALLOWED = {
    "main": {"cli", "commands", "runtime"},
    "commands": {"cli", "commands", "runtime"},
    "cli": {"cli", "runtime::context"},
    "runtime": {"runtime"},
}

# gpurun-gpu's stages, in the order the flow runs them.
GPU_STAGES = ["formats", "roots", "inventory", "request", "plan", "apply", "cdi"]


def gpu_stage(module):
    top = layer(module)
    return GPU_STAGES.index(top) if top in GPU_STAGES else len(GPU_STAGES)


failed = False
for crate in sorted(glob.glob(ROOT + "/*/src")):
    name = os.path.basename(os.path.dirname(crate))
    edges = graph(crate)
    for circle in circles(edges):
        print(f"check-layers: {name}: modules import each other in a circle: {' -> '.join(circle)}")
        failed = True
    for module, targets in edges.items():
        for target in targets:
            if target == "":
                if module:
                    print(f"check-layers: {name}: {module or 'crate root'} imports from the crate root")
                    failed = True
                continue
            if name == "gpurun-gpu" and gpu_stage(target) > gpu_stage(module):
                print(f"check-layers: gpurun-gpu: {module} imports {target}, a later stage of the flow")
                failed = True
            if name != "gpurun":
                continue
            allowed = ALLOWED.get(layer(module), set())
            if not any(target == a or target.startswith(a + "::") or layer(target) == a for a in allowed):
                print(f"check-layers: gpurun: {module} imports {target}, against the layers")
                failed = True
    print(f"check-layers: {name}: {len(edges)} modules, {sum(len(t) for t in edges.values())} imports")
sys.exit(1 if failed else 0)
