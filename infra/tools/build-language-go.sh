#!/usr/bin/env bash
# Provides pulumi-language-go, the plugin the Pulumi CLI runs `runtime: go`
# programs and plugins with, next to the pulumi binary in DIR (the CLI looks
# there). A normal Pulumi install ships it: one already on PATH is used as it
# is. Otherwise it is built from its upstream source, which the Go module
# proxy does not serve: $PULUMI_LANGUAGE_GO_SRC, else the shared tools
# folder beside the checkout (../shared/tools/pulumi-language-go).
# Prints the plugin's path.
set -euo pipefail
dir=${1:?usage: build-language-go.sh DIR (the folder holding the pulumi binary)}
repo=$(cd "$(dirname "$0")/../.." && pwd)
if found=$(command -v pulumi-language-go 2>/dev/null); then echo "$found"; exit 0; fi
if [ -x "$dir/pulumi-language-go" ]; then echo "$dir/pulumi-language-go"; exit 0; fi
src=${PULUMI_LANGUAGE_GO_SRC:-$repo/../shared/tools/pulumi-language-go}
if [ ! -x "$src/build.sh" ]; then
  msg="build-language-go: pulumi-language-go is not on PATH and its source is not at $src (set PULUMI_LANGUAGE_GO_SRC, or install Pulumi): \`pulumi up\` cannot run Go programs; \`homelab up\` still works"
  echo "$msg" >&2
  [ "${HOMELAB_REQUIRE_TOOLS:-}" = 1 ] && exit 1
  exit 0
fi
echo "build-language-go: building pulumi-language-go from $src (~25 s once the CLI's modules are cached)" >&2
"$src/build.sh" "$dir" >&2
echo "$dir/pulumi-language-go"
