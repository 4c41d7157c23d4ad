#!/bin/sh
# Images from a registry, as HPC users pull them (enroot import docker://,
# apptainer pull): a private Debian docker-registry on 127.0.0.1 with TLS
# (its own CA) and basic auth (htpasswd), images pushed with skopeo, and
# `gpurun import docker://HOST/NAME:TAG` with the credentials and CA where
# Docker keeps them (~/.docker/config.json, ~/.docker/certs.d/HOST/).
# Also oci://DIR:TAG of a multi-tag layout, a file that is not an image,
# and what `run --rootfs` does with an imported image.
# Usage: integration/registry.sh [GPURUN]   (as root; prints "N passed, M failed")
set -eu
cd "$(dirname "$0")/.."
. integration/lib/common.sh
suite_start registry.sh "${1:-}"
trap 'stop_engines; rm -rf "$work"' EXIT INT TERM

# Two images: busybox whose command prints its environment and directory,
# and a second one to tag beside it in an OCI layout.
sh scripts/fixtures/busybox-bundle.sh "$work/bb" "$gpurun" >/dev/null
MAKE_IMAGE_ENV="FROM_THE_IMAGE=yes" MAKE_IMAGE_WORKDIR=/tmp \
  python3 tests/fixtures/make_image.py fromdir "$work/img1" "$work/bb/rootfs" \
  gpurun-test/busybox:1 sh -c 'echo cmd-ran in $(pwd) FROM_THE_IMAGE=$FROM_THE_IMAGE'
mkdir -p "$work/bb/rootfs/second"
python3 tests/fixtures/make_image.py fromdir "$work/img2" "$work/bb/rootfs" gpurun-test/busybox:2 true

# The registry: TLS with a certificate for 127.0.0.1, htpasswd auth.
port=5443
host="127.0.0.1:$port"
mkdir -p "$work/certs" "$work/registry" "$work/home/.docker/certs.d/$host"
# A CA of its own signs the registry's certificate (a self-signed CA
# certificate used as the server's is refused by webpki, as by Go).
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=gpurun test CA" \
  -keyout "$work/certs/ca.key" -out "$work/certs/ca.crt" >/dev/null 2>&1
openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
  -keyout "$work/certs/registry.key" -out "$work/certs/registry.csr" >/dev/null 2>&1
printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' > "$work/certs/ext"
openssl x509 -req -in "$work/certs/registry.csr" -CA "$work/certs/ca.crt" -CAkey "$work/certs/ca.key" \
  -CAcreateserial -days 2 -extfile "$work/certs/ext" -out "$work/certs/registry.crt" >/dev/null 2>&1
cp "$work/certs/ca.crt" "$work/home/.docker/certs.d/$host/ca.crt"
htpasswd -Bbn gpurun secret-pass > "$work/htpasswd" 2>/dev/null
cat > "$work/registry.yml" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $work/registry
http:
  addr: $host
  tls:
    certificate: $work/certs/registry.crt
    key: $work/certs/registry.key
auth:
  htpasswd:
    realm: gpurun-test
    path: $work/htpasswd
EOF
docker-registry serve "$work/registry.yml" > "$work/registry.log" 2>&1 &
pids="$!"
wait_for sh -c "curl -s --cacert $work/certs/ca.crt https://$host/v2/ -o /dev/null -w '%{http_code}' | grep -q 401" \
  || { echo "docker-registry did not start"; cat "$work/registry.log"; exit 1; }
for n in 1 2; do
  skopeo copy -q --dest-cert-dir "$work/home/.docker/certs.d/$host" --dest-creds gpurun:secret-pass \
    "docker-archive:$work/img$n/image.docker.tar" "docker://$host/gpurun-test/busybox:$n"
done

set +e
export HOME="$work/home" GPURUN_IMAGE_CACHE="$work/cache"
ref="docker://$host/gpurun-test/busybox:1"

out=$("$gpurun" import "$ref" -o "$work/out0" 2>&1)
check_contains "without credentials: a clear error naming the fix" "docker login $host" "$out"
check "a failed pull leaves no bundle" "" "$(ls "$work/out0" 2>/dev/null)"

printf '{"auths":{"%s":{"auth":"%s"}}}\n' "$host" "$(printf gpurun:wrong | base64)" > "$HOME/.docker/config.json"
out=$("$gpurun" import "$ref" -o "$work/out0" 2>&1)
check_contains "with a wrong password: not authorized" "not authorized" "$out"

printf '{"auths":{"%s":{"auth":"%s"}}}\n' "$host" "$(printf gpurun:secret-pass | base64)" > "$HOME/.docker/config.json"
out=$("$gpurun" import "$ref" -o "$work/out1" 2>&1)
check "import docker://: exit 0" 0 "$?"
check_contains "import docker://: the blobs are fetched" "2 blobs fetched" "$out"
check "the rootfs is the image's" yes "$([ -x "$work/out1/rootfs/bin/busybox" ] && echo yes)"
check "the cache is an OCI layout naming the image" "$host/gpurun-test/busybox:1" \
  "$(jq -r '.manifests[].annotations."org.opencontainers.image.ref.name"' "$work/cache/index.json")"

out=$("$gpurun" import "$ref" -o "$work/out2" 2>&1)
check_contains "a second import fetches nothing: the layer cache is shared" "0 blobs fetched" "$out"

# A download cut short: half the layer is in the cache as .partial.
layer=$(jq -r '.layers[0].digest' "$work/cache/blobs/sha256/$(jq -r '.manifests[0].digest' "$work/cache/index.json" | cut -d: -f2)" | cut -d: -f2)
blob="$work/cache/blobs/sha256/$layer"
size=$(stat -c %s "$blob")
head -c $((size / 2)) "$blob" > "$blob.partial"
cp "$blob" "$work/layer.whole"
rm "$blob"
out=$("$gpurun" import "$ref" -o "$work/out3" 2>&1)
check "a cut-short download resumes: exit 0" 0 "$?"
check_contains "a cut-short download resumes where it stopped" "resuming at" "$out"
check "the resumed blob is the layer, byte for byte" yes "$(cmp -s "$blob" "$work/layer.whole" && echo yes)"

# A partial download with wrong bytes is caught by the digest.
rm "$blob"
head -c $((size / 2)) /dev/urandom > "$blob.partial"
out=$("$gpurun" import "$ref" -o "$work/out4" 2>&1)
check_contains "wrong bytes fail the digest check" "tampered" "$out"
check "the bad download is removed" no "$([ -e "$blob.partial" ] && echo yes || echo no)"
out=$("$gpurun" import "$ref" -o "$work/out4" 2>&1)
check "and the next pull gets it whole" 0 "$?"

# A registry serving a tampered layer.
rm "$blob"
stored=$(find "$work/registry" -path "*/blobs/sha256/*/$layer/data")
printf 'x' >> "$stored"
out=$("$gpurun" import "$ref" -o "$work/out5" 2>&1)
check_contains "a tampered layer in the registry is refused" "tampered" "$out"
check "and nothing of it is unpacked" "" "$(ls "$work/out5" 2>/dev/null)"
truncate -s -1 "$stored"

# An unprivileged user: its own cache, the same registry.
sh scripts/fixtures/test-user.sh >/dev/null
user=gpurun-test
uhome="$work/uhome"
mkdir -p "$uhome/.docker/certs.d/$host"
cp "$HOME/.docker/config.json" "$uhome/.docker/"
cp "$work/certs/ca.crt" "$uhome/.docker/certs.d/$host/ca.crt"
chown -R "$user" "$uhome"
out=$(su "$user" -s /bin/sh -c "env -u GPURUN_IMAGE_CACHE HOME=$uhome XDG_CACHE_HOME=$uhome/.cache XDG_RUNTIME_DIR=$uhome $gpurun import $ref -o $uhome/b" 2>&1)
check "rootless import from the registry: exit 0" "0 " "$? $(echo "$out" | grep gpurun:)"
out=$(su "$user" -s /bin/sh -c "HOME=$uhome $gpurun import $ref -o $uhome/c" 2>&1)
check_contains "a cache the user cannot write names the fix" "set GPURUN_IMAGE_CACHE" "$out"
check "rootless: the user's own cache" yes "$([ -f "$uhome/.cache/gpurun/images/index.json" ] && echo yes)"

# oci://DIR:TAG in a layout that holds two tags.
skopeo copy -q "docker-archive:$work/img1/image.docker.tar" "oci:$work/layout:one"
skopeo copy -q "docker-archive:$work/img2/image.docker.tar" "oci:$work/layout:two"
"$gpurun" import "oci://$work/layout:two" -o "$work/two" >/dev/null 2>&1
check "oci://DIR:TAG picks that tag's image" yes "$([ -d "$work/two/rootfs/second" ] && echo yes)"
out=$("$gpurun" import "oci://$work/layout" -o "$work/none" 2>&1)
check_contains "a layout with several tags needs one, and names them" "one, two" "$out"
out=$("$gpurun" import "oci://$work/layout:three" -o "$work/none" 2>&1)
check_contains "an unknown tag is named with the ones there are" "no image tagged \"three\"" "$out"
out=$("$gpurun" import /etc/passwd -o "$work/none" 2>&1)
check_contains "a file that is not an image gets a clear error" "is not an image" "$out"

# run --rootfs on an imported image: its command, environment and
# working directory, with no command given.
out=$("$gpurun" run --rootfs "$work/out1/rootfs" 2>&1)
check "run --rootfs with no command runs the image's" "cmd-ran in /tmp FROM_THE_IMAGE=yes" "$out"
out=$("$gpurun" run --rootfs "$work/out1/rootfs" -w /made/by/run -- pwd 2>&1)
check "-w to a missing directory makes it" "/made/by/run" "$out"
id=$("$gpurun" run -d --rootfs "$work/out1/rootfs" -- sleep 1 2>&1)
state=$("$gpurun" state "$id" 2>&1 | jq -r .status)
check "run -d --rootfs prints the id of a running container" running "$state"
sleep 3
check "and deletes the container when it exits" "" "$("$gpurun" state "$id" 2>/dev/null)"

summary registry.sh
