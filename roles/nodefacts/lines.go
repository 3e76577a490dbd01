package nodefacts

import "strings"

// LinesFuncs defines two shell functions that print a file with the
// shell's own read, not a forked cat, sed or base64: on a busy machine
// each process a refresh starts on every node is dear
// (docs/benchmarks.md). `lines KEY FILE` prints every line as KEY=LINE;
// `certlines KEY FILE` only its certificate blocks, so a private key kept
// beside them never leaves the node. A missing file prints nothing. Lines
// collects either back into the file's text.
const LinesFuncs = `lines() { [ -f "$2" ] || return 0; while IFS= read -r l || [ -n "$l" ]; do printf '%s=%s\n' "$1" "$l"; done < "$2"; }
certlines() { [ -f "$2" ] || return 0; c=; while IFS= read -r l || [ -n "$l" ]; do [ "$l" = "-----BEGIN CERTIFICATE-----" ] && c=1; [ -n "$c" ] && printf '%s=%s\n' "$1" "$l"; [ "$l" = "-----END CERTIFICATE-----" ] && c=; done < "$2"; }`

// Lines is the text that lines or certlines printed under key, nil when
// they printed none.
func Lines(out, key string) []byte {
	var b []byte
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, key+"="); ok {
			b = append(append(b, v...), '\n')
		}
	}
	return b
}
