#!/usr/bin/env bash
# The aclshmem wrapper bitcode that kernels using dl.* / libshmem_device.* link on an NPU.
#
# The wrappers (_mlir_ciface_aclshmem_*) are AscendNPU-IR's template library
# bishengir/lib/Template/lib/Shmem/Shmem.cpp.  AscendNPU-IR compiles it only when built with
# --build-shmem-template, once per core type and architecture (bishengir/lib/Template/
# CMakeLists.txt, compile_shmem_to_bc):
#     Shmem.aiv.c220.bc  Shmem.aic.c220.bc  Shmem.mix.aiv.c220.bc  Shmem.mix.aic.c220.bc   (Ascend910B: Atlas A2/A3)
#     Shmem.*.c310.bc                                                                      (Ascend910D)
# and merges them into its template library lib/meta_op.<variant>.<arch>.bc.  The published
# ascendnpu-ir wheel and hicann/shmem's own device bitcode have none of them.
#
#   bash scripts/aclshmem_bitcode.sh find [DIR...]   look for them (default: $ASCEND_HOME_PATH,
#                                                    ./AscendNPU-IR/build, the lib/ of bishengir-compile)
#   bash scripts/aclshmem_bitcode.sh build [DIR]     clone AscendNPU-IR into DIR (default ./AscendNPU-IR)
#                                                    and build it with the shmem template (needs CANN 9.0.0:
#                                                    ASCEND_HOME_PATH set, the BiSheng compiler in
#                                                    $BISHENG_COMPILER, default $ASCEND_HOME_PATH/bin)
#
# Both end by printing the line to use, e.g.
#     export TRITON_DIST_ACLSHMEM_BITCODE=/path/to/dir/with/Shmem.aiv.c220.bc
# backend 'npu' then links each op with the variant of its kernel's core type
# (backend_ascend/npu_compile.py: aiv for vector-only kernels, mix.aiv / mix.aic in kernels
# with a dot).  A bishengir-compile whose own meta_op.*.bc carries the wrappers needs no
# variable at all.
set -euo pipefail

# The AscendNPU-IR commit whose Shmem.cpp tests/data/aclshmem_wrappers.txt was written from.
ASCENDNPU_IR_URL=${ASCENDNPU_IR_URL:-https://gitcode.com/Ascend/AscendNPU-IR.git}
ASCENDNPU_IR_COMMIT=${ASCENDNPU_IR_COMMIT:-23fe4da0e761912ca8feb5f8cef3c9214696753d}
ARCH=${TRITON_DIST_ACLSHMEM_ARCH:-c220}
PROBE=_mlir_ciface_aclshmem_my_pe

usage() { sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }

report() {   # report DIR: the variables to set for the wrapper files found in DIR
  local dir=$1
  echo "found the aclshmem wrappers (arch $ARCH) in $dir:"
  ls -1 "$dir"/Shmem.*."$ARCH".bc 2>/dev/null | sed 's/^/  /'
  echo
  echo "export TRITON_DIST_ACLSHMEM_BITCODE=$dir"
  [ "$ARCH" = c220 ] || echo "export TRITON_DIST_ACLSHMEM_ARCH=$ARCH"
}

find_wrappers() {
  local roots=("$@")
  if [ ${#roots[@]} -eq 0 ]; then
    roots=()
    [ -n "${ASCEND_HOME_PATH:-}" ] && roots+=("$ASCEND_HOME_PATH")
    [ -d ./AscendNPU-IR/build ] && roots+=(./AscendNPU-IR/build)
    if command -v bishengir-compile >/dev/null; then
      roots+=("$(dirname "$(dirname "$(readlink -f "$(command -v bishengir-compile)")")")/lib")
    fi
  fi
  [ ${#roots[@]} -gt 0 ] || { echo "nothing to search: give directories, or set ASCEND_HOME_PATH" >&2; return 1; }
  local hit
  hit=$(find "${roots[@]}" -name "Shmem.aiv.$ARCH.bc" -print -quit 2>/dev/null || true)
  if [ -n "$hit" ]; then report "$(cd "$(dirname "$hit")" && pwd)"; return 0; fi
  hit=$(find "${roots[@]}" -name "meta_op.aiv.$ARCH.bc" 2>/dev/null | while read -r f; do
          if grep -q -a "$PROBE" "$f"; then echo "$f"; break; fi; done)
  if [ -n "$hit" ]; then
    echo "the template library $(dirname "$hit") carries the aclshmem wrappers: bishengir-compile links them"
    echo "itself, per core type; leave TRITON_DIST_ACLSHMEM_BITCODE unset when that bishengir-compile is used."
    return 0
  fi
  echo "no aclshmem wrapper bitcode (Shmem.aiv.$ARCH.bc, or a meta_op.aiv.$ARCH.bc defining $PROBE) under:" >&2
  printf '  %s\n' "${roots[@]}" >&2
  echo "build them with: bash $0 build" >&2
  return 1
}

build_wrappers() {
  local dir=${1:-./AscendNPU-IR}
  : "${ASCEND_HOME_PATH:?set ASCEND_HOME_PATH (source the set_env.sh of CANN 9.0.0 first)}"
  local bisheng=${BISHENG_COMPILER:-$ASCEND_HOME_PATH/bin}
  [ -d "$bisheng" ] || { echo "no BiSheng compiler directory $bisheng: set BISHENG_COMPILER" >&2; return 1; }
  if [ ! -d "$dir/.git" ]; then
    git clone "$ASCENDNPU_IR_URL" "$dir"
  fi
  git -C "$dir" fetch -q origin "$ASCENDNPU_IR_COMMIT" 2>/dev/null || true
  git -C "$dir" checkout -q "$ASCENDNPU_IR_COMMIT"
  git -C "$dir" submodule update --init --recursive
  # AscendNPU-IR's documented template build (docs/source/en/introduction/quick_start/
  # installing_guide.md), plus its --build-shmem-template switch (build-tools/build.sh)
  (cd "$dir" && ./build-tools/build.sh -o ./build --build-type Release --apply-patches --fast-build \
      -t --build-shmem-template --bisheng-compiler="$bisheng")
  find_wrappers "$dir/build"
}

case "${1:-}" in
  find) shift; find_wrappers "$@" ;;
  build) shift; build_wrappers "$@" ;;
  *) usage ;;
esac
