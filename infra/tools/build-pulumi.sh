#!/usr/bin/env bash
# Builds the Pulumi CLI from github.com/pulumi/pulumi/pkg/v3 (no prebuilt
# downloads reach these machines) into a cache outside the repository, keyed
# by version. Prints the directory holding the binary.
set -euo pipefail
version=${PULUMI_VERSION:-v3.274.1}
cache=${HOMELAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/homelab}
out="$cache/tools/pulumi-$version"
if [ -x "$out/pulumi" ]; then echo "$out"; exit 0; fi
work="$cache/build/pulumi-$version"
mkdir -p "$work" "$out"
cd "$work"
if [ ! -f go.mod ] || ! grep -q "pkg/v3 $version" go.mod; then
  rm -f go.mod go.sum
  go mod init homelab.local/pulumibuild >/dev/null 2>&1
  gomod=$(go mod download -json "github.com/pulumi/pulumi/pkg/v3@$version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  {
    printf 'require (\n\tgithub.com/pulumi/pulumi/pkg/v3 %s\n\tgithub.com/pulumi/pulumi/sdk/v3 %s\n)\n' "$version" "$version"
    # pkg's own go.mod replaces sdk with ../sdk (dropped: we pin the
    # version) and pins a fork of atotto/clipboard (kept).
    grep -E '^replace github.com/atotto/clipboard|^\s*github.com/atotto/clipboard =>' "$gomod" | sed 's/^\s*/replace /; s/^replace replace/replace/'
  } >> go.mod
  cat > tools.go <<GO
//go:build tools
package tools
import _ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
GO
  echo "build-pulumi: resolving modules for pulumi $version" >&2
  go mod tidy >&2
fi
echo "build-pulumi: building the pulumi CLI $version (first time only, ~10 min on 2 cores)" >&2
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$version" \
  -o "$out/pulumi.tmp" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi >&2
mv "$out/pulumi.tmp" "$out/pulumi"
echo "$out"
