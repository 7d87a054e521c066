#!/bin/sh
# Builds a one-layer OCI image archive holding a static /pause, for `ctr images import`, so the
# real-containerd test needs no registry. Usage: make-pause-image.sh WORKDIR IMAGE_REF OUT_TAR
set -eu
work=$1 ref=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work/rootfs" "$work/oci/blobs/sha256"
gcc -static -O2 -o "$work/rootfs/pause" "$here/pause.c"
strip "$work/rootfs/pause" 2>/dev/null || true

# Store a file as a blob; print "<digest> <size>".
blob() {
  digest=$(sha256sum "$1" | cut -d' ' -f1)
  cp "$1" "$work/oci/blobs/sha256/$digest"
  echo "$digest $(stat -c %s "$1")"
}

tar --numeric-owner --owner=0 --group=0 --mtime=@0 -C "$work/rootfs" -cf "$work/layer.tar" pause
diff_id=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
gzip -n -9 "$work/layer.tar"
set -- $(blob "$work/layer.tar.gz"); layer_digest=$1 layer_size=$2

case $(uname -m) in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; *) arch=$(uname -m) ;; esac
cat > "$work/config.json" <<JSON
{"architecture":"$arch","os":"linux","config":{"Entrypoint":["/pause"]},
 "rootfs":{"type":"layers","diff_ids":["sha256:$diff_id"]}}
JSON
set -- $(blob "$work/config.json"); config_digest=$1 config_size=$2

cat > "$work/manifest.json" <<JSON
{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
 "config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:$config_digest","size":$config_size},
 "layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:$layer_digest","size":$layer_size}]}
JSON
set -- $(blob "$work/manifest.json"); manifest_digest=$1 manifest_size=$2

echo '{"imageLayoutVersion":"1.0.0"}' > "$work/oci/oci-layout"
cat > "$work/oci/index.json" <<JSON
{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json",
 "digest":"sha256:$manifest_digest","size":$manifest_size,
 "platform":{"architecture":"$arch","os":"linux"},
 "annotations":{"io.containerd.image.name":"$ref","org.opencontainers.image.ref.name":"${ref##*:}"}}]}
JSON
tar --numeric-owner --owner=0 --group=0 -C "$work/oci" -cf "$out" oci-layout index.json blobs
