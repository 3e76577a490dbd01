package bench

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// minRuns is how many runs of a size a verdict needs: one sample on a
// shared machine is an anecdote.
const minRuns = 3

// spread is the median of a figure over runs, with its least and
// greatest value.
type spread struct {
	median, lo, hi float64
	n              int
}

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{median: m, lo: s[0], hi: s[len(s)-1], n: len(s)}
}

// seconds and times print a spread; a figure no run reached prints as
// a dash, not as a zero that reads like a measurement.
func (s spread) seconds() string {
	if s.n == 0 {
		return "-\t-"
	}
	return fmt.Sprintf("%.1f s\t%.1f–%.1f s", s.median, s.lo, s.hi)
}

func (s spread) times() string {
	if s.n == 0 {
		return "-\t-"
	}
	return fmt.Sprintf("%.2fx\t%.2f–%.2fx", s.median, s.lo, s.hi)
}

// figure collects one value of every run that has it (a run that failed
// before it has none).
func figure(runs []*report, f func(*report) (float64, bool)) spread {
	var xs []float64
	for _, r := range runs {
		if v, ok := f(r); ok {
			xs = append(xs, v)
		}
	}
	return spreadOf(xs)
}

// goal is one of the benchmark's goals: a ratio taken within each run (so
// the machine's speed cancels out), judged on its median over the runs.
type goal struct {
	name   string
	ratio  func(*report) (float64, bool)
	atMost bool // the ratio must be at most target, else at least
	target float64
}

// goalsFor are the goals of a lab size (issue 33): the critical path's,
// the sequential script's (at least as fast at 7 nodes, 1.5x faster at
// 28, where the provider's parallel joins pay off), and the no-op's, as a
// share of the fresh up of the same run.
func goalsFor(workers int) []goal {
	seq := goal{name: "sequential script / fresh up", atMost: false, target: goalSequential, ratio: func(r *report) (float64, bool) {
		return r.seq.Seconds() / r.fresh.Seconds(), r.seq > 0 && r.fresh > 0
	}}
	if workers >= scaleWorkers {
		seq.target = goalSequentialScale
	}
	return []goal{
		{name: "fresh up / critical path", atMost: true, target: goalCritical, ratio: func(r *report) (float64, bool) {
			return r.fresh.Seconds() / r.critical.Seconds(), r.critical > 0
		}},
		seq,
		{name: "no-op up / fresh up", atMost: true, target: goalNoopShare, ratio: func(r *report) (float64, bool) {
			return r.noop.Seconds() / r.fresh.Seconds(), r.noop > 0 && r.fresh > 0
		}},
	}
}

// judge is a goal's verdict on the runs' median: no verdict below
// minRuns samples.
func (g goal) judge(s spread) string {
	if s.n < minRuns {
		return fmt.Sprintf("no verdict (%d of %d runs)", s.n, minRuns)
	}
	if g.atMost {
		return verdict(s.median <= g.target)
	}
	return verdict(s.median >= g.target)
}

func (g goal) targetText() string {
	if g.atMost {
		return fmt.Sprintf("<= %.2fx", g.target)
	}
	return fmt.Sprintf(">= %.2fx", g.target)
}

// printSummary prints a size's figures and goals over its runs: medians
// with their spread, each ratio taken within a run. The no-op must also
// change nothing and run nothing in every run.
func printSummary(out io.Writer, workers int, runs []*report) {
	if len(runs) == 0 {
		return
	}
	sec := func(d time.Duration) (float64, bool) { return d.Seconds(), d > 0 }
	fmt.Fprintf(out, "\nsummary, %d nodes, %d runs (median, then least–greatest):\n", 3+workers, len(runs))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  figure\tmedian\tspread")
	fmt.Fprintf(tw, "  fresh up\t%s\n", figure(runs, func(r *report) (float64, bool) { return sec(r.fresh) }).seconds())
	fmt.Fprintf(tw, "  critical path\t%s\n", figure(runs, func(r *report) (float64, bool) { return sec(r.critical) }).seconds())
	fmt.Fprintf(tw, "  no-op up\t%s\n", figure(runs, func(r *report) (float64, bool) { return sec(r.noop) }).seconds())
	fmt.Fprintf(tw, "  sequential script\t%s\n", figure(runs, func(r *report) (float64, bool) { return sec(r.seq) }).seconds())
	if pss := figure(runs, func(r *report) (float64, bool) { return float64(r.pss) / (1 << 30), r.pss > 0 }); pss.n > 0 {
		fmt.Fprintf(tw, "  the lab's memory\t%.2f GiB\t%.2f–%.2f GiB\n", pss.median, pss.lo, pss.hi)
	}
	tw.Flush()

	fmt.Fprintln(out, "\ngoals (each ratio within one run; the verdict on the median):")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  goal\tmedian\tspread\ttarget\tresult")
	for _, g := range goalsFor(workers) {
		s := figure(runs, g.ratio)
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", g.name, s.times(), g.targetText(), g.judge(s))
	}
	result, why := noopCorrect(runs)
	if why != "" {
		result += " (" + why + ")"
	}
	fmt.Fprintf(tw, "  no-op up changes nothing\t\t\tevery run: all same, 0 mutating\t%s\n", result)
	tw.Flush()
}

// noopCorrect is the no-op's correctness over the runs: every run's
// verdict must pass.
func noopCorrect(runs []*report) (string, string) {
	n := 0
	for i, r := range runs {
		if r.noop == 0 {
			continue
		}
		n++
		if result, why := r.noopVerdict(); result != "PASS" {
			return result, fmt.Sprintf("run %d: %s", i+1, why)
		}
	}
	if n == 0 {
		return "no verdict", "no run reached the no-op"
	}
	return "PASS", ""
}

// printScaling compares the largest lab with the 7-node one, each ratio
// within one run (its two sizes measured back to back), judged on the
// median.
func printScaling(out io.Writer, rounds [][]*report) {
	var small, big []*report
	for _, round := range rounds {
		var s, b *report
		for _, r := range round {
			if r.workers == labWorkers && r.fresh > 0 && r.noop > 0 {
				s = r
			}
			if r.workers >= scaleWorkers && r.fresh > 0 && r.noop > 0 {
				b = r
			}
		}
		if s != nil && b != nil {
			small, big = append(small, s), append(big, b)
		}
	}
	if len(big) == 0 {
		return
	}
	pairs := func(f func(s, b *report) float64) spread {
		var xs []float64
		for i := range big {
			xs = append(xs, f(small[i], big[i]))
		}
		return spreadOf(xs)
	}
	fmt.Fprintf(out, "\nscaling, %d nodes against %d (each ratio within one run):\n", 3+big[0].workers, 3+small[0].workers)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  goal\tmedian\tspread\ttarget\tresult")
	for _, g := range []goal{
		{name: "no-op up", atMost: true, target: goalNoopScale},
		{name: "fresh up", atMost: true, target: goalFreshScale},
	} {
		var s spread
		if g.name == "no-op up" {
			s = pairs(func(a, b *report) float64 { return b.noop.Seconds() / a.noop.Seconds() })
		} else {
			s = pairs(func(a, b *report) float64 { return b.fresh.Seconds() / a.fresh.Seconds() })
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", g.name, s.times(), g.targetText(), g.judge(s))
	}
	if pss := figure(big, func(r *report) (float64, bool) { return float64(r.pss) / (1 << 30), r.pss > 0 }); pss.n > 0 {
		ok := verdict(pss.median < float64(goalPSSScale)/(1<<30))
		if pss.n < minRuns {
			ok = fmt.Sprintf("no verdict (%d of %d runs)", pss.n, minRuns)
		}
		fmt.Fprintf(tw, "  the lab's memory\t%.2f GiB\t%.2f–%.2f GiB\t< %.0f GiB\t%s\n", pss.median, pss.lo, pss.hi, float64(goalPSSScale)/(1<<30), ok)
	}
	tw.Flush()
}
