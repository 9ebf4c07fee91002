#!/usr/bin/env bash
# install-check.sh: checks that `go install github.com/inabox/inabox/cmd/inabox@latest`
# gives the whole tool, as it will once a module proxy serves the module.
# It serves this checkout's committed files (git ls-files) as version
# $VERSION from a file-based GOPROXY placed before the usual one (the
# dependencies still come from there), installs @latest into a temporary
# GOBIN, and runs `inabox --version`, `inabox run` and `inabox help up`
# from an empty directory: nothing may depend on the clone.
#
#   scripts/install-check.sh        (make install-check)
set -euo pipefail
cd "$(dirname "$0")/.."
version=${VERSION:-v0.0.1-installcheck}
mod=github.com/inabox/inabox
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dir=$work/proxy/$mod/@v
mkdir -p "$dir" "$work/bin" "$work/empty"
git ls-files -z | xargs -0 -I{} echo {} >"$work/files"
python3 - "$work/files" "$dir/$version.zip" "$mod@$version" <<'PY'
import sys, zipfile
files, out, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for f in open(files).read().splitlines():
        z.write(f, prefix + "/" + f)
PY
cp go.mod "$dir/$version.mod"
echo "$version" >"$dir/list"
printf '{"Version":"%s","Time":"2026-01-01T00:00:00Z"}\n' "$version" >"$dir/$version.info"
export GOBIN=$work/bin GOFLAGS= GONOSUMDB=$mod GONOSUMCHECK=1 GOPRIVATE=
export GOPROXY="file://$work/proxy,$(go env GOPROXY)"
(cd "$work/empty" && go install "$mod/cmd/inabox@latest")
got=$("$work/bin/inabox" --version)
[ "$got" = "inabox $version" ] || { echo "install-check: --version printed \"$got\", want \"inabox $version\"" >&2; exit 1; }
(cd "$work/empty" && "$work/bin/inabox" run >run.txt && "$work/bin/inabox" help up >/dev/null)
grep -q 'jobs finished' "$work/empty/run.txt" || { echo "install-check: inabox run did not finish its jobs:" >&2; cat "$work/empty/run.txt" >&2; exit 1; }
echo "install-check: go install $mod/cmd/inabox@latest ($version from a file proxy of this checkout): $got; run and help work outside the clone"
