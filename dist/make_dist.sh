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
  case "$h" in
    */dist/adaptiveload.h | dist/adaptiveload.h) cp "$h" "$root/include/adaptiveload.h" ;; # the umbrella
    *)
      mkdir -p "$root/include/$(dirname "$h")"
      cp "$h" "$root/include/$h"
      ;;
  esac
done
for f in $py; do cp "$f" "$root/python/adaptiveload/"; done
for f in $ex; do cp "$f" "$root/examples/"; done
cp "$gpu" "$root/tools/"
chmod 755 "$root/tools/"*.sh
# The system libraries both need, except the C runtime every Linux has (glibc,
# libgcc_s, libstdc++), the CUDA driver (cudart is linked in statically) and FFmpeg
# (//decode: libavformat, libavcodec, libswscale, libavutil and the ~130 codec libraries
# behind them, 165 MB): the bundle's raw-media decoding needs Debian's FFmpeg runtime
# (libavformat59 libavcodec59 libswscale6 libavutil57) on the machine. A library that only
# FFmpeg pulls in is left out; one the other modules need as well is bundled.
needed() { # the direct NEEDED libraries of the files given, resolved through ldd
  for f in "$@"; do
    for n in $(readelf -d "$f" | awk '/NEEDED/ {gsub(/[][]/, "", $5); print $5}'); do
      ldd "$f" | awk -v n="$n" '$1 == n && $3 ~ /^\// {print $3}'
    done
  done | sort -u
}
keep=$(for so in $(needed "$bin" "$lib"); do
  case "$(basename "$so")" in
    libavformat.so* | libavcodec.so* | libswscale.so* | libavutil.so* | libswresample.so*) ;;
    *) echo "$so" && ldd "$so" | awk '/=> \// {print $3}' ;;
  esac
done | sort -u)
for so in $keep; do
  case "$(basename "$so")" in
    libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | libgcc_s.so* | libstdc++.so* | libcuda.so*) ;;
    *) cp -L "$so" "$root/lib/" ;;
  esac
done
# README.txt lists what the bundle holds, read from the files just copied (and the CLI's own
# list of verbs), so that it names every file and nothing the bundle lacks.
wrap() { # the words on stdin as lines of at most 64 characters, indented to the description column
  tr '\n' ' ' | awk '{ line = ""; for (i = 1; i <= NF; i++) {
    if (line != "" && length(line) + 1 + length($i) > 64) { print "                            " line; line = "" }
    line = line == "" ? $i : line " " $i }
    if (line != "") print "                            " line }'
}
verbs=$("$root/bin/adaptiveload" --help | awk '/^verbs:/ { on = 1; next } on && /^  [a-z]/ { printf "%s%s", sep, $1; sep = ", " } on && /^$/ { on = 0 }')
syslibs=$(cd "$root/lib" && ls | grep -v '^libadaptiveload\.so$' || true)
{
  echo "AdaptiveLoad install bundle (relocatable)."
  echo
  echo "  bin/adaptiveload          the CLI: $verbs"
  echo "  lib/libadaptiveload.so    the C API (al_*), for C users and the Python package"
  if [ -n "$syslibs" ]; then
    echo "  lib/                      beside it, the system libraries it and the CLI need:"
    echo "$syslibs" | wrap
  fi
  echo "  include/                  public C headers:"
  (cd "$root/include" && find . -type f | sed 's|^\./||' | sort) | wrap
  echo "  python/adaptiveload/      the Python package (ctypes, no compiled extension)"
  echo "  examples/                 programs to copy:"
  (cd "$root/examples" && ls) | wrap
  for f in $(cd "$root/tools" && ls); do
    case $f in
      gpu_stream_check.sh) printf '  %-25s %s\n' "tools/$f" "stream benchmark + PyTorch stall check on a GPU machine" ;;
      *) printf '  tools/%s\n' "$f" ;;
    esac
  done
  cat <<'TXT'

Use:
  export PATH=$PWD/bin:$PATH PYTHONPATH=$PWD/python
  python3 -c "import adaptiveload; print(adaptiveload.__version__)"
The package finds ../../lib/libadaptiveload.so relative to itself; ADAPTIVELOAD_LIB
overrides it.
TXT
} >"$root/README.txt"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$tmp" -cf - adaptiveload | gzip -n -9 >"$out"
