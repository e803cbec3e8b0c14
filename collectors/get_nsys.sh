#!/usr/bin/env bash
# Fetch Nsight Systems 2023.4 (the `nsys` CLI and its QdstrmImporter) from Debian's non-free
# section and unpack it, without root and without installing it (the packages depend on libcuda,
# but `nsys profile -t nvtx,osrt`, `nsys export` and `nsys stats` run on a CPU-only machine).
#
#   collectors/get_nsys.sh [DEST]      # default: ${XDG_CACHE_HOME:-~/.cache}/tracekit/nsys
#
# Leaves DEST/bin/nsys and DEST/bin/QdstrmImporter, where `tracekit collect --profiler nsys`
# looks for them (or put DEST/bin on PATH).
set -euo pipefail
dest="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/tracekit/nsys}"
if [ -x "$dest/bin/nsys" ] && [ -x "$dest/bin/QdstrmImporter" ]; then echo "$dest/bin/nsys"; exit 0; fi
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$dest"
cat > "$work/sources.list" <<SRC
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian sid non-free
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
SRC
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
          -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o "Debug::NoLocking=1"
          -o "APT::Sandbox::User=$(id -un)")
apt-get "${apt_opts[@]}" -q update >&2
packages=(nsight-systems-target nsight-systems libarrow500 libparquet500)
# The importer needs libssh.so.4; take bookworm's when the system has none.
[ -e /usr/lib/x86_64-linux-gnu/libssh.so.4 ] || packages+=(libssh-4/bookworm)
(cd "$work" && apt-get "${apt_opts[@]}" download "${packages[@]}" >&2)
for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$dest/root"; done
target="$dest/root/usr/lib/x86_64-linux-gnu/nsight-systems/target-linux-x64"
host="$dest/root/usr/lib/nsight-systems/host-linux-x64"
libs="$dest/root/usr/lib/x86_64-linux-gnu"
# The importer's libssh.so points at ../../x86_64-linux-gnu/libssh.so.4: the unpacked one, or the system's.
[ -e "$libs/libssh.so.4" ] || ln -sf /usr/lib/x86_64-linux-gnu/libssh.so.4 "$libs/libssh.so.4"
mkdir -p "$dest/bin"
ln -sf "$target/nsys" "$dest/bin/nsys"
cat > "$dest/bin/QdstrmImporter" <<WRAP
#!/bin/sh
LD_LIBRARY_PATH="$libs:$host\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$host/QdstrmImporter" "\$@"
WRAP
chmod +x "$dest/bin/QdstrmImporter"
"$dest/bin/nsys" --version >&2
echo "$dest/bin/nsys"
