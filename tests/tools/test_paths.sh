# Sourced by the shell tests of this folder: where the built binaries and the tools are.
#   ROOT      the source tree (the runfiles root under `bazel test`)
#   RUNFILES  the binaries: the runfiles under `bazel test`; bazel-bin when run by hand
#             (or in the Soft-RoCE VM)
#   TOOLS     the scripts of tools/ that go with them
# shellcheck shell=bash
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [[ -n "${TEST_SRCDIR:-}" ]]; then
  RUNFILES=$TEST_SRCDIR/msgr
  TOOLS=$RUNFILES/tools
else
  RUNFILES=$ROOT/bazel-bin
  TOOLS=$ROOT/tools
fi
