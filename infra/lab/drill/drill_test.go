package drill

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/impact"
)

func TestLayoutInventoryRefusesWhatTheInventoryCannotExpress(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := LayoutInventory("../../../inventory/lab.yaml", "dns", dir); err == nil || !strings.Contains(err.Error(), "cluster.endpoint.dnsName") {
		t.Errorf("dns without dnsName: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused layout wrote %d file(s)", len(entries))
	}
	path, inv, err := LayoutInventory("../../../inventory/lab.yaml", "single-ip", dir)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Endpoint() != "10.77.0.120:6443" {
		t.Errorf("single-ip endpoint %s", inv.Endpoint())
	}
	if _, _, err := LayoutInventory(path, "single-ip", t.TempDir()); err != nil {
		t.Errorf("the written inventory does not load again: %v", err)
	}
}

func TestCompareFindsEveryDifference(t *testing.T) {
	consumers := []impact.Consumer{
		{ID: "kubectl", Address: "10.77.0.100:6443"},
		{ID: "kubelet/gpu-1", Address: "10.77.0.100:6443"},
		{ID: "kubelet/cp-2", Address: "10.77.0.121:6443"},
	}
	o := impact.Outcome{Members: 2, Healthy: 2, Quorum: true, Writable: true, Data: impact.DataWritable,
		VIP: "cp-2", VIPHolders: []string{"cp-2"}, VIPAfter: "cp-1",
		Cells: []impact.Cell{
			{Consumer: "kubectl", State: impact.OK},
			{Consumer: "kubelet/gpu-1", State: impact.OK},
			{Consumer: "kubelet/cp-2", State: impact.OK},
		}}
	r := &Result{
		Layout: "vip",
		Consumers: []Consumer{
			{ID: "kubectl", Address: "10.77.0.100:6443"},
			{ID: "kubelet/gpu-1", Address: "10.77.0.120:6443"},
			{ID: "kubelet/cp-2", Address: "10.77.0.121:6443"},
		},
		Cells:  map[string]string{"kubectl": impact.OK, "kubelet/gpu-1": impact.OK, "kubelet/cp-2": impact.Down},
		EtcdUp: 2, EtcdHealthy: 1, Quorum: true, Writable: false, Data: impact.DataReadOnly,
		VIPHolder: "cp-2", VIPHolders: []string{"cp-2"}, Restored: 10 * time.Second,
		Splits:   []Split{{From: 11 * time.Second, To: 11100 * time.Millisecond, Holders: []string{"cp-1", "cp-2"}}},
		Handback: &Handback{From: "cp-2", To: "cp-2"},
	}
	got := map[string]bool{}
	for _, m := range Mismatches(Compare(o, consumers, r)) {
		got[m.Item] = true
	}
	want := []string{"kubelet/gpu-1 address", "kubelet/cp-2", "etcd members healthy", "writable", "data", "split brain beyond the prediction", "VIP after recovery"}
	for _, w := range want {
		if !got[w] {
			t.Errorf("no mismatch reported for %s", w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("mismatches %v, want exactly %v", got, want)
	}

	// A split the prediction has (a killed keepalived's address left
	// behind) is no mismatch while the failure lasts.
	o.VIPHolders, r.VIPHolders = []string{"cp-1", "cp-2"}, []string{"cp-1", "cp-2"}
	r.Splits = []Split{{From: 2 * time.Second, To: 9 * time.Second, Holders: []string{"cp-1", "cp-2"}}}
	for _, m := range Mismatches(Compare(o, consumers, r)) {
		if strings.HasPrefix(m.Item, "VIP on") || strings.HasPrefix(m.Item, "split") {
			t.Errorf("predicted split reported: %+v", m)
		}
	}
}

// samples builds endpoint samples every 50 ms from a pattern: '+' answers,
// '-' does not.
func samples(pattern string) []Sample {
	var out []Sample
	for i, c := range pattern {
		out = append(out, Sample{At: time.Duration(i) * 50 * time.Millisecond, Answers: c == '+'})
	}
	return out
}

func TestFailover(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	long := strings.Repeat("+", 50) // 2.5 s of answers
	cases := []struct {
		pattern    string
		until      time.Duration
		down, back time.Duration
	}{
		{"++++++", time.Second, 0, 0},
		{"++---++", time.Second, ms(100), ms(250)},
		{"++---" + long, 10 * time.Second, ms(100), ms(250)},
		{"++-----", time.Second, ms(100), -1},
		{"++---++", ms(200), ms(100), -1}, // back only after the window
		// An answer or two between failures is not back: the endpoint is
		// back at the run that lasts.
		{"++---++---" + long, 10 * time.Second, ms(100), ms(500)},
		{"++---+" + strings.Repeat("-", 60), 10 * time.Second, ms(100), -1},
	}
	for _, tc := range cases {
		down, back := failover(samples(tc.pattern), 0, tc.until)
		if down != tc.down || back != tc.back {
			t.Errorf("%s until %s: down %s back %s, want %s %s", tc.pattern, tc.until, down, back, tc.down, tc.back)
		}
	}
}

func holderSamples(sets ...string) []Sample {
	var out []Sample
	for i, s := range sets {
		out = append(out, Sample{At: time.Duration(i) * 100 * time.Millisecond, Holders: strings.Fields(s)})
	}
	return out
}

func TestSplitsAndHandback(t *testing.T) {
	h := holderSamples("cp-1", "cp-1", "", "cp-2", "cp-1 cp-2", "cp-1 cp-2", "cp-2", "cp-2", "cp-1", "cp-1")
	sp := splits(h, 400*time.Millisecond)
	if len(sp) != 1 || sp[0].From != 400*time.Millisecond || sp[0].To != 500*time.Millisecond || strings.Join(sp[0].Holders, " ") != "cp-1 cp-2" || !sp[0].Handover {
		t.Errorf("splits %+v", sp)
	}
	if sp := splits(h, 50*time.Millisecond); len(sp) != 1 || sp[0].Handover {
		t.Errorf("100 ms of two holders with 50 ms adverts is a split brain: %+v", sp)
	}
	if m := vipMoved(h, "cp-1", time.Second); m != 300*time.Millisecond {
		t.Errorf("the VIP moved at %s, want 300 ms", m)
	}
	if m := vipMoved(h, "cp-1", 300*time.Millisecond); m != -1 {
		t.Errorf("the VIP never moved: %s", m)
	}
	// Restored at 600 ms: cp-2 held it, cp-1 took it at 800 ms while the
	// endpoint missed two probes.
	ep := samples("++++++++++++++---+++++++")
	hb := handback(h, ep, 600*time.Millisecond)
	if hb.From != "cp-2" || hb.To != "cp-1" || hb.At != 200*time.Millisecond || hb.Gap != 150*time.Millisecond {
		t.Errorf("handback %+v", hb)
	}
	// No move after the restore: no handback, no gap.
	hb = handback(holderSamples("cp-2", "cp-1", "cp-1", "cp-1"), samples("++++++++"), 150*time.Millisecond)
	if hb.From != "cp-1" || hb.To != "cp-1" || hb.At != 0 || hb.Gap != 0 {
		t.Errorf("no handback %+v", hb)
	}
	// The move right after a silent stretch counts that stretch.
	if g := outageAround(samples("+++---+++"), 300*time.Millisecond); g != 150*time.Millisecond {
		t.Errorf("gap %s", g)
	}
	if g := outageAround(samples("+++++++"), 200*time.Millisecond); g != 0 {
		t.Errorf("gap with every probe answered: %s", g)
	}
	// An outage long before the move is not the move's.
	if g := outageAround(samples("+--++++++++++++++++++++++++++++++++++"), 1700*time.Millisecond); g != 0 {
		t.Errorf("gap from an earlier outage: %s", g)
	}
}

func TestSummarize(t *testing.T) {
	off := impact.NewFailure(impact.FailOff, "cp-1")
	var rs []*Result
	for _, fo := range []time.Duration{1500, 1200, 0, -1, 1700} {
		r := &Result{Layout: "vip", Failure: off, Failover: fo * time.Millisecond, NotReady: map[string]time.Duration{"cp-1": 55 * time.Second},
			Handback: &Handback{From: "cp-2", To: "cp-1", At: 12 * time.Second, Gap: 100 * time.Millisecond}}
		if fo < 0 {
			r.Failover = -1
		}
		rs = append(rs, r)
	}
	rs = append(rs, &Result{Layout: "single-ip", Failure: off, Failover: -1})
	figs := Summarize(rs)
	if len(figs) != 2 || figs[0].Drills != 5 || figs[0].Never != 1 || figs[0].Lost != 1 || len(figs[0].Failover) != 3 {
		t.Fatalf("figures %+v", figs)
	}
	if P50(figs[0].Failover) != 1500*time.Millisecond || Max(figs[0].Failover) != 1700*time.Millisecond {
		t.Errorf("p50 %s max %s", P50(figs[0].Failover), Max(figs[0].Failover))
	}
	if len(figs[0].NotReady["cp-1"]) != 5 || len(figs[0].HandbackGap) != 5 {
		t.Errorf("NotReady %v handback %v", figs[0].NotReady, figs[0].HandbackGap)
	}
	var b strings.Builder
	if err := WriteSummary(&b, figs); err != nil || !strings.Contains(b.String(), "1.50 / 1.70 s") {
		t.Errorf("summary:\n%s", b.String())
	}
}

func TestParseFailure(t *testing.T) {
	cases := []struct {
		fail, how, want, err string
	}{
		{"cp-1", "power-off", "off cp-1", ""},
		{"cp-1,cp-2", "off", "off cp-1+cp-2", ""},
		{"cp-2", "apiserver", "apiserver dead on cp-2", ""},
		{" cp-1 , cp-3 ", "cut", "cut cp-1+cp-3", ""},
		{"cp-1", "reboot", "", "--how"},
		{"", "cut", "", "--fail"},
		{"cp-1,cp-2,cp-3", "off", "", "--fail"},
	}
	for _, tc := range cases {
		f, err := ParseFailure(tc.fail, tc.how)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q %q: %v, want an error naming %s", tc.fail, tc.how, err, tc.err)
			}
			continue
		}
		if err != nil || f.ID != tc.want {
			t.Errorf("%q %q: %q %v, want %q", tc.fail, tc.how, f.ID, err, tc.want)
		}
	}
}
