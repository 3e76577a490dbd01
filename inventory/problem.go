package inventory

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/go-multierror"
)

// Problem is one thing wrong (or worth a warning) in an inventory, tied to
// the field it is about so users and tests never have to parse prose.
type Problem struct {
	// Path is the field, e.g. "nodes[2].address" or "cluster.endpoint.vip".
	Path string
	// Line in the file, 0 when the field is absent from it.
	Line int
	// Message says what is wrong and how to fix it.
	Message string
}

func (p *Problem) Error() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s (line %d): %s", p.Path, p.Line, p.Message)
	}
	return fmt.Sprintf("%s: %s", p.Path, p.Message)
}

// onePerLine prints every problem on its own line, field path first, so a
// user fixing a file sees all of them at once.
func onePerLine(errs []error) string {
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = e.Error()
	}
	return fmt.Sprintf("%d problem(s) in the inventory:\n%s", len(errs), strings.Join(lines, "\n"))
}

// problems accumulates errors and warnings while checking one inventory.
type problems struct {
	pos      positions
	errs     *multierror.Error
	warnings []*Problem
}

func (ps *problems) errorf(path, format string, args ...any) {
	ps.errs = multierror.Append(ps.errs, &Problem{Path: path, Line: ps.pos.line(path), Message: fmt.Sprintf(format, args...)})
}

func (ps *problems) warnf(path, format string, args ...any) {
	ps.warnings = append(ps.warnings, &Problem{Path: path, Line: ps.pos.line(path), Message: fmt.Sprintf(format, args...)})
}

// err returns every error in the order of the file, so a user fixes them
// top to bottom; problems about absent fields (line 0) come last.
func (ps *problems) err() error {
	if ps.errs == nil {
		return nil
	}
	sort.SliceStable(ps.errs.Errors, func(i, j int) bool {
		a, b := lineOf(ps.errs.Errors[i]), lineOf(ps.errs.Errors[j])
		return a != 0 && (b == 0 || a < b)
	})
	ps.errs.ErrorFormat = onePerLine
	return ps.errs
}

func lineOf(err error) int {
	var p *Problem
	if errors.As(err, &p) {
		return p.Line
	}
	return 0
}

// Problems lists the problems an error from this package carries, so callers
// can match on field paths instead of message text.
func Problems(err error) []*Problem {
	var out []*Problem
	var merr *multierror.Error
	if errors.As(err, &merr) {
		for _, e := range merr.Errors {
			var p *Problem
			if errors.As(e, &p) {
				out = append(out, p)
			}
		}
		return out
	}
	var p *Problem
	if errors.As(err, &p) {
		out = append(out, p)
	}
	return out
}
