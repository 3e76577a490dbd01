package nodefacts

import "strings"

// Lines is the text that infra/scripts/nodefacts/lines.sh's lines or
// certlines printed under key (a file, line by line), nil when they
// printed none.
func Lines(out, key string) []byte {
	var b []byte
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, key+"="); ok {
			b = append(append(b, v...), '\n')
		}
	}
	return b
}
