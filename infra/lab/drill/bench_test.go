package drill

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/envvars"
	"github.com/homelab-dev/homelab/infra/impact"
	"github.com/homelab-dev/homelab/infra/lab"
	"github.com/homelab-dev/homelab/inventory"
)

// BenchmarkDrills drills, b.N times each, every failure kind on the VIP
// holder (the endpoint's node in single-ip) and on a non-first
// control-plane node, and two nodes lost, in one layout, and reports the
// figures docs/layouts.md gives: when the API answered through the
// endpoint again (p50, max), the Nodes that turned NotReady, the VIP's
// handback and any split brain. Every drill is also compared with
// compare's prediction.
//
//	HOMELAB_E2E=1 HOMELAB_DRILL_LAYOUT=vip HOMELAB_DRILL_SECONDS=60 \
//	  go test ./infra/lab/drill -run '^$' -bench Drills -benchtime 5x -timeout 3h
//
// HOMELAB_DRILL_KINDS (power-off,cut,keepalived,apiserver,two-nodes) picks
// some kinds only.
func BenchmarkDrills(b *testing.B) {
	needE2E(b)
	if b.N == 1 && benchtimeRuns() > 1 {
		// -benchtime Nx calls the benchmark with b.N = 1 first and then
		// with N: a lab built and every drill run once for nothing.
		return
	}
	layout := os.Getenv(envvars.DrillLayout)
	if layout == "" {
		layout = inventory.LayoutVIP
	}
	window := 15 * time.Second
	if s, err := strconv.Atoi(os.Getenv(envvars.DrillSeconds)); err == nil && s > 0 {
		window = time.Duration(s) * time.Second
	}
	kinds := []string{"power-off", "cut", "keepalived", "apiserver", "two-nodes"}
	if k := os.Getenv(envvars.DrillKinds); k != "" {
		kinds = strings.Split(k, ",")
	}
	var failures []impact.Failure
	for _, k := range kinds {
		if k == "two-nodes" {
			failures = append(failures, impact.NewFailure(impact.FailOff, "cp-1", "cp-2"), impact.NewFailure(impact.FailOff, "cp-2", "cp-3"))
			continue
		}
		for _, n := range []string{"cp-1", "cp-2"} {
			f, err := ParseFailure(n, k)
			if err != nil {
				b.Fatal(err)
			}
			failures = append(failures, f)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()
	l, invPath, work := labForTest(b, ctx)
	path, _, err := LayoutInventory(invPath, layout, work)
	if err != nil {
		b.Fatal(err)
	}
	progress := &lab.SyncBuffer{}
	s, err := Build(ctx, l, path, filepath.Join(work, "state"), progress)
	if err != nil {
		b.Fatalf("build: %v\n%s", err, progress.String())
	}
	var results []*Result
	b.ResetTimer()
	for range b.N {
		for _, f := range failures {
			r, checks, err := drillOnce(ctx, l, s, f, window)
			if err != nil {
				b.Fatalf("%s: %v", f.ID, err)
			}
			results = append(results, r)
			for _, m := range Mismatches(checks) {
				b.Errorf("%s: %s predicted %q, measured %q", f.ID, m.Item, m.Predicted, m.Measured)
			}
			// On stdout: the testing package keeps 10 lines of a
			// benchmark's log.
			fmt.Printf("%s: API through the endpoint again %s, NotReady %v, handback %+v, splits %v\n", f.ID, failoverText(r), r.NotReady, r.Handback, r.Splits)
		}
	}
	b.StopTimer()
	var sum strings.Builder
	figs := Summarize(results)
	WriteSummary(&sum, figs)
	fmt.Printf("figures (%s layout, %s windows, %d drills each):\n%s", layout, window, b.N, sum.String())
	for _, f := range figs {
		if len(f.Failover) > 0 {
			name := strings.ReplaceAll(strings.ReplaceAll(f.Failure, " ", "-"), "+", "-")
			b.ReportMetric(P50(f.Failover).Seconds(), name+"-p50-s")
			b.ReportMetric(Max(f.Failover).Seconds(), name+"-max-s")
		}
	}
}

// benchtimeRuns is N of -benchtime Nx, else 0.
func benchtimeRuns() int {
	f := flag.Lookup("test.benchtime")
	if f == nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSuffix(f.Value.String(), "x"))
	if err != nil || !strings.HasSuffix(f.Value.String(), "x") {
		return 0
	}
	return n
}
