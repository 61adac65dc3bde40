"""The installed public headers of ddprun::runtime and ddprun::torch include nothing but the C++
standard library, ddprun's own headers and LibTorch's: a trainer built against any LibTorch (2.x ships
fmt 11 on its include path) must be able to include them, so spdlog, fmt, Boost, nlohmann and Gloo
stay inside the libraries.

Usage: public_headers.py BUILD_DIR WORK_DIR CXX [TORCH_INCLUDE_DIR...]

`cmake --install BUILD_DIR --prefix WORK_DIR/prefix`, then every header under include/ddprun/ is
preprocessed with `CXX -std=c++20 -E -H` (with LibTorch's include folders when given). Two checks,
each naming the header and the include that breaks the rule:
  - the tree that -H prints: a file included by a ddprun header must be the standard library's
    (the compiler's C++ folders), ddprun's, or LibTorch's; what the standard library and LibTorch
    include in turn is theirs;
  - every #include line of a ddprun header, resolved on its own: a header already included through
    LibTorch is not printed again by -H, but including it directly is still a leak.
LibTorch's files are those under its include folders; where such a folder is a system one
(/usr/include, as Debian's libtorch-dev has it), only LibTorch's own subfolders count (ATen, c10,
caffe2, torch, ...), so /usr/include/spdlog is not LibTorch's. Before all that, a probe header that
includes a third-party header must be caught, so that the test cannot pass by seeing nothing.
"""

import os
import re
import shutil
import subprocess
import sys

LIBTORCH_FOLDERS = {"ATen", "c10", "caffe2", "torch", "TH", "THC", "THCUNN", "THNN", "kineto"}
SYSTEM_FOLDERS = {"/usr/include", "/usr/local/include"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def under(path, folder):
    return os.path.commonpath([path, folder]) == folder


def standard_library_folders(cxx):
    """The compiler's own C++ include folders (libstdc++ and GCC's), from `CXX -E -v`."""
    out = subprocess.run([cxx, "-std=c++20", "-x", "c++", "-E", "-v", "/dev/null"], capture_output=True, text=True).stderr
    listed = out.split("#include <...> search starts here:")[1].split("End of search list.")[0].split()
    folders = [os.path.realpath(f) for f in listed if "/c++/" in f + "/" or "/lib/gcc/" in f]
    if not folders:
        raise SystemExit(f"{cxx} -E -v names no C++ standard library folder:\n{out}")
    return folders


class Rule:
    def __init__(self, ddprun_folder, standard, torch_folders):
        self.ddprun = os.path.realpath(ddprun_folder)
        self.standard = standard
        self.torch = [os.path.realpath(f) for f in torch_folders]

    def owner(self, path):
        """'ddprun', 'standard', 'libtorch', or None (third party)."""
        path = os.path.realpath(path)
        if under(path, self.ddprun):
            return "ddprun"
        if any(under(path, f) for f in self.standard):
            return "standard"
        for folder in self.torch:
            if under(path, folder):
                first = os.path.relpath(path, folder).split(os.sep)[0]
                if folder not in SYSTEM_FOLDERS or first in LIBTORCH_FOLDERS:
                    return "libtorch"
        return None


def include_tree(cxx, flags, source):
    """(depth, path) of every file -H prints for `source`; raises naming the error when it fails."""
    result = subprocess.run([cxx, "-std=c++20", "-E", "-H", "-o", os.devnull, *flags, "-x", "c++", source],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(result.stderr.strip()[-2000:])
    tree = []
    for line in result.stderr.splitlines():
        match = re.match(r"^(\.+) (.+)$", line)
        if match:
            tree.append((len(match.group(1)), match.group(2)))
    return tree


def tree_problems(rule, tree, header):
    """Files a ddprun header (the preprocessed one, depth 0, or one it includes) pulls in directly."""
    problems = []
    parents = {0: (header, "ddprun")}
    for depth, path in tree:
        parent, parent_owner = parents[depth - 1]
        owner = rule.owner(path) if parent_owner == "ddprun" else parent_owner  # theirs, below them
        if owner is None:
            problems.append(f"{parent} includes {path}, which is neither the C++ standard library, ddprun's nor LibTorch's")
        parents[depth] = (path, owner or "third party")
    return problems


def directive_problems(rule, cxx, flags, header, work, cache):
    """Each #include line of `header`, resolved by itself."""
    problems = []
    with open(header, encoding="utf-8") as f:
        text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    for line in text.splitlines():
        match = INCLUDE.match(line)
        if not match:
            if re.match(r"^\s*#\s*include\b", line):
                problems.append(f"{header}: an #include this test cannot read: {line.strip()}")
            continue
        quote, name = match.groups()
        local = os.path.join(os.path.dirname(header), name)
        if quote == '"' and os.path.exists(local):
            path = local
        else:
            if name not in cache:
                probe = os.path.join(work, "probe.cpp")
                with open(probe, "w") as f:
                    f.write(f"#include <{name}>\n")
                tree = include_tree(cxx, flags, probe)
                cache[name] = tree[0][1] if tree else None
            path = cache[name]
        if path is None or rule.owner(path) is None:
            problems.append(f"{header} includes {quote}{name}{'>' if quote == '<' else quote} "
                            f"({path}), which is neither the C++ standard library, ddprun's nor LibTorch's")
    return problems


def check(rule, cxx, flags, headers, work):
    problems, cache = [], {}
    for header in headers:
        try:
            problems += tree_problems(rule, include_tree(cxx, flags, header), header)
        except RuntimeError as error:
            problems.append(f"{header} does not preprocess on its own: {error}")
        problems += directive_problems(rule, cxx, flags, header, work, cache)
    return list(dict.fromkeys(problems))  # a header included by several is reported once


def main():
    build, work, cxx, torch_folders = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    prefix = os.path.join(work, "prefix")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    result = subprocess.run(["cmake", "--install", build, "--prefix", prefix], capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"cmake --install {build} failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    include = os.path.join(prefix, "include")
    headers = sorted(os.path.join(d, f) for d, _, files in os.walk(os.path.join(include, "ddprun"))
                     for f in files if f.endswith(".hpp"))
    have_torch_headers = any(os.sep + "torch" + os.sep in h for h in headers)
    if not headers:
        raise SystemExit(f"no public header installed under {include}/ddprun")
    if have_torch_headers and not torch_folders:
        raise SystemExit("ddprun::torch's headers are installed but no LibTorch include folder was given")
    flags = [f"-I{include}"] + [f"-I{f}" for f in torch_folders]
    rule = Rule(os.path.join(include, "ddprun"), standard_library_folders(cxx), torch_folders)

    # The probe: a public header that leaks a third-party header this machine has must be caught.
    probe_prefix = os.path.join(work, "probe", "include")
    os.makedirs(os.path.join(probe_prefix, "ddprun"))
    leak = next((name for name in ("spdlog/spdlog.h", "fmt/core.h", "nlohmann/json.hpp", "boost/version.hpp")
                 if any(os.path.exists(os.path.join(d, name)) for d in SYSTEM_FOLDERS)), None)
    if leak is None:
        raise SystemExit("no third-party header (spdlog, fmt, nlohmann, Boost) to probe the check with")
    probe = os.path.join(probe_prefix, "ddprun", "leaky.hpp")
    with open(probe, "w") as f:
        f.write(f"#pragma once\n#include <string>\n#include <{leak}>\n")
    probe_rule = Rule(os.path.join(probe_prefix, "ddprun"), rule.standard, torch_folders)
    caught = check(probe_rule, cxx, [f"-I{probe_prefix}"] + flags[1:], [probe], work)
    if not caught:
        raise SystemExit(f"the check missed #include <{leak}> in a probe header: it would miss a real leak")
    print(f"probe: a header including <{leak}> is caught ({len(caught)} findings)")

    problems = check(rule, cxx, flags, headers, work)
    print(f"{len(headers)} installed public headers checked ({'with' if have_torch_headers else 'without'} "
          f"ddprun::torch's), LibTorch include folders: {torch_folders or 'none'}")
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
