package etcdsnapshot

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Listed is a snapshot a node listed (the etcd/snapshots script: one
// "MTIME NAME" line each, MTIME by the node's clock).
type Listed struct {
	Name  string
	MTime time.Time
}

var nameRE = regexp.MustCompile(NamePattern)

// ErrForeignLine is a listing line the timer's files never make.
var ErrForeignLine = errors.New("is not \"MTIME snapshot-YYYYMMDDTHHMMSSZ.db\"")

// ParseListing reads a node's listing, newest first. The node's own grep
// filters with NamePattern, but what comes back is the node's word: a
// name becomes part of a local path in `etcd snapshot --fetch`, so any
// line that is not exactly a snapshot is refused, never skipped.
func ParseListing(stdout string) ([]Listed, error) {
	var out []Listed
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if line == "" {
			continue
		}
		ts, name, _ := strings.Cut(line, " ")
		sec, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || !nameRE.MatchString(name) {
			return nil, fmt.Errorf("%q %w", line, ErrForeignLine)
		}
		out = append(out, Listed{Name: name, MTime: time.Unix(sec, 0)})
	}
	// The name holds the time it was taken (UTC): later names are newer.
	sort.Slice(out, func(i, j int) bool { return out[i].Name > out[j].Name })
	return out, nil
}
