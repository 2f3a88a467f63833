#!/bin/sh
# make_dist.sh OUT BIN LIB "HEADERS" "PYFILES" "EXAMPLES" GPU_SCRIPT
# Builds the relocatable install bundle (see the //dist comment in BUILD).
set -e
out=$1 bin=$2 lib=$3 headers=$4 py=$5 ex=$6 gpu=$7
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$tmp/adaptiveload
mkdir -p "$root/bin" "$root/lib" "$root/include" "$root/python/adaptiveload" "$root/examples" "$root/tools"
cp "$bin" "$root/bin/adaptiveload"
cp "$lib" "$root/lib/libadaptiveload.so"
chmod 755 "$root/bin/adaptiveload" "$root/lib/libadaptiveload.so"
for h in $headers; do
  mkdir -p "$root/include/$(dirname "$h")"
  cp "$h" "$root/include/$h"
done
for f in $py; do cp "$f" "$root/python/adaptiveload/"; done
for f in $ex; do cp "$f" "$root/examples/"; done
cp "$gpu" "$root/tools/"
chmod 755 "$root/tools/"*.sh
# The system libraries both need, except the C runtime every Linux has (glibc,
# libgcc_s, libstdc++) and the CUDA driver (cudart is linked in statically).
ldd "$bin" "$lib" | awk '/=> \// {print $3}' | sort -u | while read -r so; do
  case "$(basename "$so")" in
    libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | libgcc_s.so* | libstdc++.so* | libcuda.so*) ;;
    *) cp -L "$so" "$root/lib/" ;;
  esac
done
cat >"$root/README.txt" <<'TXT'
AdaptiveLoad install bundle (relocatable).

  bin/adaptiveload          the CLI (synth, index, fit, plan, inspect, stream, demo)
  lib/libadaptiveload.so    the C API (al_*), for C users and the Python package;
                            the system libraries it needs sit beside it
  include/                  public C headers
  python/adaptiveload/      the Python package (ctypes, no compiled extension)
  examples/                 train_dataloader.py, train_stream.py
  tools/gpu_stream_check.sh stream benchmark + PyTorch stall check on a GPU machine

Use:
  export PATH=$PWD/bin:$PATH PYTHONPATH=$PWD/python
  python3 -c "import adaptiveload; print(adaptiveload.BatchSampler)"
The package finds ../../lib/libadaptiveload.so relative to itself; ADAPTIVELOAD_LIB
overrides it.
TXT
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$tmp" -cf - adaptiveload | gzip -n -9 >"$out"
