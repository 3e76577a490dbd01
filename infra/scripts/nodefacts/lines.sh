# Defines two functions that print a file with the shell's own read, no
# forked cat, sed or base64 (a process per file was most of a refresh's
# cost, docs/benchmarks.md). "lines KEY FILE" prints each line as
# KEY=LINE; "certlines KEY FILE" only its certificate blocks, so a key kept
# beside them never leaves the node. A missing file prints nothing.
# roles/nodefacts.Lines reads either back. Both return 0, so a script
# under set -e goes on.
lines() {
	[ -f "$2" ] || return 0
	while IFS= read -r l || [ -n "$l" ]; do
		printf '%s=%s\n' "$1" "$l"
	done < "$2"
}
certlines() {
	[ -f "$2" ] || return 0
	c=
	while IFS= read -r l || [ -n "$l" ]; do
		case $l in "-----BEGIN CERTIFICATE-----") c=1 ;; esac
		if [ -n "$c" ]; then printf '%s=%s\n' "$1" "$l"; fi
		case $l in "-----END CERTIFICATE-----") c= ;; esac
	done < "$2"
}
