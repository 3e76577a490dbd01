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

// StampsScript sets the shell variable stamps to a line for each of tools
// found in PATH: "PATH INODE SIZE CHANGE MODIFY" (to the nanosecond), one
// stat for all, of a link's target. The same file keeps its stamp; a
// binary replaced (dpkg renames a new file over it, a copy writes it in
// place) gets another inode or change time, which only root setting the
// clock back could undo. So a version read once from a stamped binary
// holds until its stamp changes, and large Go programs need not be
// started on every read to ask theirs. The shell walks PATH itself:
// command -v takes one name in dash, and a command substitution per tool
// is a fork each. It uses the positional parameters.
func StampsScript(tools ...string) string {
	return "set --\nfor t in " + strings.Join(tools, " ") + `; do IFS=:; for d in $PATH; do d=${d:-.}; [ -f "$d/$t" ] && [ -x "$d/$t" ] && { set -- "$@" "$d/$t"; break; }; done; unset IFS; done` + "\n" +
		`stamps=; [ $# -eq 0 ] || stamps=$(stat -Lc '%n %i %s %z %y' "$@" 2>/dev/null)` + "\n"
}
