#!/usr/bin/env python3
"""The house's layering, checked: every project #include points down or within its folder.

    python3 tools/check_layers.py [--root DIR]

Reads the #include "..." lines of every .h/.cc under msg/, proto/, osd_sim/ and client/ and
refuses any that goes up or sideways. The layers, bottom to top (README "Layout"):

    msg/base                       crc32c, errno, wire codec, counters, addresses, files
    msg/ring                       the ring format (the messenger/OSD contract's memory)
    msg                            the messenger contract (messenger.h, frames, auth)
    msg/session                    the session rules both backends share (sans-I/O)
    msg/tcp, msg/rdma              the backends (never each other); msg/rdma/verbs is the
                                   device layer, its providers (soft, ibverbs) behind it
    proto                          wire contracts (client<->OSD codec, monitor protos)
    osd_sim/store                  the object store (base only)
    osd_sim/metrics, osd_sim/mon   the monitor and its client; the daemons' metrics
    osd_sim                        the OSD (no backend, no client)
    client                         the client library
    client/*, osd_sim/tools        tools (bench, CLI, thrasher, admin): anything below,
                                   and the OSD's admin socket client

Exit status 0 when every include is allowed, 1 (listing each offending line) otherwise.
tools/test.sh runs it as its "layers" step.
"""
import argparse
import os
import re
import sys

# folder prefix -> the folders (prefixes) its files may include besides their own folder.
# The first matching (longest) prefix of a file's folder decides.
BASE = ["msg/base"]
CONTRACT = BASE + ["msg/ring", "msg"]
ALLOWED = {
    "msg/base": [],
    "msg/ring": BASE,
    "msg/fuzz": CONTRACT,
    "msg": BASE + ["msg/ring"],
    "msg/session": CONTRACT,
    "msg/tcp": CONTRACT + ["msg/session"],
    # The verbs layer: device.h, and open_device.cc choosing a provider; a provider
    # implements device.h and includes nothing of the other.
    "msg/rdma/verbs": BASE + ["msg/rdma/verbs/soft", "msg/rdma/verbs/ibverbs"],
    "msg/rdma/verbs/soft": BASE + ["msg/rdma/verbs"],
    "msg/rdma/verbs/ibverbs": BASE + ["msg/rdma/verbs"],
    "msg/rdma": CONTRACT + ["msg/session", "msg/rdma/verbs"],
    "proto": CONTRACT,
    "osd_sim/store": BASE,
    "osd_sim/metrics": CONTRACT,
    "osd_sim/mon": CONTRACT + ["proto", "osd_sim/metrics"],
    "osd_sim/tools": CONTRACT + ["proto", "osd_sim"],
    "osd_sim": CONTRACT + ["proto", "osd_sim/store", "osd_sim/mon", "osd_sim/metrics"],
    "client": CONTRACT + ["proto", "osd_sim/mon"],
}
TOOLS = ["client/bench", "client/cli", "client/thrash"]
for t in TOOLS:
    ALLOWED[t] = CONTRACT + ["proto", "osd_sim/mon", "client"] + TOOLS
# Single files a tool may use from a layer it otherwise does not: the OSD's admin socket
# client (the bench reads the OSDs' perf dumps through it, as msgr_admin does).
ALLOWED_FILES = {"osd_sim/admin_socket.h": ["client/bench", "osd_sim/tools"]}

SCANNED = ("msg", "proto", "osd_sim", "client")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def folder_of(path):
    return os.path.dirname(path)


def rule_for(folder):
    best = None
    for prefix in ALLOWED:
        if folder == prefix or folder.startswith(prefix + "/"):
            if best is None or len(prefix) > len(best):
                best = prefix
    return best


def allowed(src_folder, target):
    if not target.startswith(tuple(p + "/" for p in SCANNED)):
        return True  # a library's header (absl/, grpcpp/, ...) or a generated one
    tgt_folder = folder_of(target)
    rule = rule_for(src_folder)
    if rule is None:
        return False
    if tgt_folder == src_folder or rule_for(tgt_folder) == rule:
        return True  # its own folder, or its layer's (verbs/soft, ...)
    for ok in ALLOWED[rule]:
        if tgt_folder == ok or tgt_folder.startswith(ok + "/") and rule_for(tgt_folder) == ok:
            return True
    return src_folder in ALLOWED_FILES.get(target, []) or any(
        src_folder.startswith(f + "/") for f in ALLOWED_FILES.get(target, []))


def check(root):
    bad = []
    files = 0
    for top in SCANNED:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith((".h", ".cc")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                files += 1
                with open(path, errors="replace") as f:
                    for n, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if m and not allowed(folder_of(rel), m.group(1)):
                            bad.append(f"{rel}:{n}: includes {m.group(1)}")
    return files, bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    args = ap.parse_args()
    files, bad = check(os.path.abspath(args.root))
    for b in bad:
        print(f"layers: {b}: points up or sideways (tools/check_layers.py says what may "
              "include what)")
    print(f"layers: {files} files, {len(bad)} includes out of place")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
