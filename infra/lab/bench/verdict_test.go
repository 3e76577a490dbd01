package main

import (
	"strings"
	"testing"
	"time"
)

func TestNoopVerdict(t *testing.T) {
	quick, slow := goalNoop/2, goalNoop+time.Second
	same := map[string]int{"same": 117}
	for _, tc := range []struct {
		name   string
		r      report
		result string
		why    []string // each must be in the reason
	}{
		{"quick, all same, nothing run", report{freshMutating: 90, noop: quick, noopChanges: same}, "PASS", nil},
		{"too slow", report{freshMutating: 90, noop: slow, noopChanges: same}, "MISS", []string{"too slow"}},
		{"an update", report{freshMutating: 90, noop: quick, noopChanges: map[string]int{"same": 116, "update": 1}}, "MISS", []string{"update 1"}},
		{"a zero count is no change", report{freshMutating: 90, noop: quick, noopChanges: map[string]int{"same": 117, "update": 0}}, "PASS", nil},
		{"a mutating command", report{freshMutating: 90, noop: quick, noopChanges: same, noopMutating: 1}, "MISS", []string{"1 mutating"}},
		{"every problem named", report{freshMutating: 90, noop: slow, noopChanges: map[string]int{"same": 115, "replace": 2}, noopMutating: 3},
			"MISS", []string{"too slow", "replace 2", "3 mutating"}},
		{"a fresh up that logged nothing", report{freshMutating: 0, noop: quick, noopChanges: same}, "INVALID", []string{"not written"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			result, why := tc.r.noopVerdict()
			if result != tc.result {
				t.Errorf("result %s (%s), want %s", result, why, tc.result)
			}
			for _, w := range tc.why {
				if !strings.Contains(why, w) {
					t.Errorf("reason %q lacks %q", why, w)
				}
			}
			if tc.why == nil && why != "" {
				t.Errorf("reason %q for a pass", why)
			}
		})
	}
}
