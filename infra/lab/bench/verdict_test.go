package bench

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
			result, why := tc.r.noopVerdict(goalNoop)
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

// A bigger lab's no-op has no time limit of its own: it is judged against
// the 7-node one's (printScaling).
func TestNoopVerdictWithoutLimit(t *testing.T) {
	r := report{freshMutating: 90, noop: time.Hour, noopChanges: map[string]int{"same": 400}}
	if result, why := r.noopVerdict(0); result != "PASS" {
		t.Errorf("%s (%s)", result, why)
	}
}

func TestParseSizes(t *testing.T) {
	if got, err := parseSizes("4, 25"); err != nil || len(got) != 2 || got[0] != 4 || got[1] != 25 {
		t.Errorf("4, 25: %v %v", got, err)
	}
	for _, bad := range []string{"", "3", "25,4", "4,4", "four"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
