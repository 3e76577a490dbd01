package nodefacts

import (
	"fmt"
	"strconv"
	"strings"
)

// FileStat is what a File's read compares with what should be on the
// node: the file's permission bits and its content's SHA-256.
type FileStat struct {
	Mode   int
	Sha256 string
}

// ParseFileStats reads what infra/scripts/nodefacts/filestats.sh printed
// for paths (the same list, in the same order): the stats of those that are regular files.
// Output that does not add up (a file removed between the test and stat)
// is an error, never a file taken for missing.
func ParseFileStats(paths []string, out string) (map[string]FileStat, error) {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	idx := strings.Fields(lines[0])
	if len(lines) != 1+2*len(idx) {
		return nil, fmt.Errorf("file stats: %d regular files but %d lines of stat and sha256sum", len(idx), len(lines)-1)
	}
	stats := make(map[string]FileStat, len(idx))
	for k, s := range idx {
		i, err := strconv.Atoi(s)
		if err != nil || i < 0 || i >= len(paths) {
			return nil, fmt.Errorf("file stats: no path %q among %d", s, len(paths))
		}
		mode, err := strconv.ParseInt(strings.TrimSpace(lines[1+k]), 8, 32)
		if err != nil {
			return nil, fmt.Errorf("file stats: mode of %s: %q", paths[i], lines[1+k])
		}
		// sha256sum marks a line whose name it escaped with a backslash.
		sum, _, _ := strings.Cut(strings.TrimPrefix(lines[1+len(idx)+k], `\`), " ")
		if len(sum) != 64 {
			return nil, fmt.Errorf("file stats: checksum of %s: %q", paths[i], lines[1+len(idx)+k])
		}
		stats[paths[i]] = FileStat{Mode: int(mode), Sha256: sum}
	}
	return stats, nil
}
