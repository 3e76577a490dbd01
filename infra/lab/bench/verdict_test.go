package bench

import (
	"strings"
	"testing"
	"time"
)

func TestNoopVerdict(t *testing.T) {
	same := map[string]int{"same": 117}
	for _, tc := range []struct {
		name   string
		r      report
		result string
		why    []string // each must be in the reason
	}{
		{"all same, nothing run", report{freshMutating: 90, noop: time.Hour, noopChanges: same}, "PASS", nil},
		{"an update", report{freshMutating: 90, noopChanges: map[string]int{"same": 116, "update": 1}}, "MISS", []string{"update 1"}},
		{"a zero count is no change", report{freshMutating: 90, noopChanges: map[string]int{"same": 117, "update": 0}}, "PASS", nil},
		{"a mutating command", report{freshMutating: 90, noopChanges: same, noopMutating: 1}, "MISS", []string{"1 mutating"}},
		{"every problem named", report{freshMutating: 90, noopChanges: map[string]int{"same": 115, "replace": 2}, noopMutating: 3},
			"MISS", []string{"replace 2", "3 mutating"}},
		{"a fresh up that logged nothing", report{freshMutating: 0, noopChanges: same}, "INVALID", []string{"not written"}},
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

func TestSpreadIsMedianAndRange(t *testing.T) {
	for _, tc := range []struct {
		in          []float64
		med, lo, hi float64
	}{
		{[]float64{3, 1, 2}, 2, 1, 3},
		{[]float64{4, 1, 3, 2}, 2.5, 1, 4},
		{[]float64{7}, 7, 7, 7},
	} {
		s := spreadOf(tc.in)
		if s.median != tc.med || s.lo != tc.lo || s.hi != tc.hi || s.n != len(tc.in) {
			t.Errorf("%v: %+v", tc.in, s)
		}
	}
	// The caller's samples keep their order.
	in := []float64{3, 1, 2}
	spreadOf(in)
	if in[0] != 3 {
		t.Errorf("spreadOf sorted its input: %v", in)
	}
}

// A goal is judged on the median of ratios each taken within one run, and
// not at all on fewer than minRuns runs: a single slow run neither passes
// nor fails it.
func TestGoalsJudgeTheMedianOfRuns(t *testing.T) {
	run := func(fresh, critical, seq, noop float64) *report {
		d := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
		return &report{fresh: d(fresh), critical: d(critical), seq: d(seq), noop: d(noop)}
	}
	goals := map[string]goal{}
	for _, g := range goalsFor(labWorkers) {
		goals[g.name] = g
	}
	seq := goals["sequential script / fresh up"]
	if seq.target != 1.0 {
		t.Errorf("7 nodes: the script goal is %.2fx, want never slower (1.0x)", seq.target)
	}
	// One run slower than the script, two faster: the median passes.
	runs := []*report{run(50, 45, 40, 4), run(40, 36, 48, 4), run(42, 38, 50, 4)}
	if got := seq.judge(figure(runs, seq.ratio)); got != "PASS" {
		t.Errorf("median of 0.8, 1.2, 1.19: %s", got)
	}
	// Two slower: the median misses.
	runs = []*report{run(50, 45, 40, 4), run(50, 45, 45, 4), run(42, 38, 50, 4)}
	if got := seq.judge(figure(runs, seq.ratio)); got != "MISS" {
		t.Errorf("median of 0.8, 0.9, 1.19: %s", got)
	}
	if got := seq.judge(figure(runs[:2], seq.ratio)); !strings.Contains(got, "no verdict") {
		t.Errorf("two runs judged: %s", got)
	}
	noop := goals["no-op up / fresh up"]
	runs = []*report{run(50, 45, 60, 4), run(50, 45, 60, 10), run(50, 45, 60, 5)}
	if got := noop.judge(figure(runs, noop.ratio)); got != "PASS" {
		t.Errorf("no-op shares 0.08, 0.2, 0.1: %s", got)
	}
	var big goal
	for _, g := range goalsFor(scaleWorkers) {
		if g.name == seq.name {
			big = g
		}
	}
	if big.target != 1.5 {
		t.Errorf("28 nodes: the script goal is %.2fx, want 1.5x", big.target)
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
