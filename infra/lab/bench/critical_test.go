package bench

import (
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
)

func TestCriticalPath(t *testing.T) {
	const p = "urn:pulumi:s::p::"
	prov := p + "pulumi:providers:homelab::default"
	res := []resource{
		{URN: p + "pulumi:pulumi:Stack::p-s"},
		{URN: prov, Custom: true},
		{URN: p + "homelab:cluster:Cluster::c", Parent: p + "pulumi:pulumi:Stack::p-s"},
		{URN: p + "homelab:cluster:Cluster$homelab:index:Host::a", Custom: true, Parent: p + "homelab:cluster:Cluster::c", Provider: prov + "::id-1"},
		{URN: p + "homelab:cluster:Cluster$homelab:index:File::a:/x", Custom: true, Provider: prov + "::id-1",
			Dependencies: []string{p + "homelab:cluster:Cluster$homelab:index:Host::a"}},
		{URN: p + "homelab:cluster:Cluster$homelab:index:File::a:/y", Custom: true, Provider: prov + "::id-1",
			Dependencies: []string{p + "homelab:cluster:Cluster$homelab:index:Host::a"}},
		{URN: p + "homelab:cluster:Cluster$homelab:index:KubeadmInit::a", Custom: true, Provider: prov + "::id-1",
			Dependencies: []string{p + "homelab:cluster:Cluster$homelab:index:File::a:/x", p + "homelab:cluster:Cluster$homelab:index:File::a:/y"}},
		{URN: p + "homelab:cluster:Cluster$homelab:index:Host::b", Custom: true, Provider: prov + "::id-1"},
	}
	own := map[string]time.Duration{
		prov:                             1 * time.Second,
		p + "homelab:cluster:Cluster::c": 100 * time.Second, // a component: weighs nothing
		p + "homelab:cluster:Cluster$homelab:index:Host::a":        2 * time.Second,
		p + "homelab:cluster:Cluster$homelab:index:File::a:/x":     3 * time.Second,
		p + "homelab:cluster:Cluster$homelab:index:File::a:/y":     5 * time.Second,
		p + "homelab:cluster:Cluster$homelab:index:KubeadmInit::a": 10 * time.Second,
		p + "homelab:cluster:Cluster$homelab:index:Host::b":        12 * time.Second,
	}
	total, chain := criticalPath(res, own)
	if total != 18*time.Second {
		t.Errorf("total %s, want 18s", total)
	}
	var got []string
	for _, s := range chain {
		got = append(got, shortName(s.URN))
	}
	want := []string{"provider homelab default", "Host a", "File a:/y", "KubeadmInit a"}
	if len(got) != len(want) {
		t.Fatalf("chain %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("chain %q, want %q", got, want)
			break
		}
	}
}

// A refresh's read starts with op "refresh" and ends with what it found
// ("same"): the read clock times it, the step clock does not.
func TestClocksSplitReadsFromSteps(t *testing.T) {
	pre := func(urn string, op apitype.OpType) events.EngineEvent {
		return events.EngineEvent{EngineEvent: apitype.EngineEvent{ResourcePreEvent: &apitype.ResourcePreEvent{Metadata: apitype.StepEventMetadata{URN: urn, Op: op}}}}
	}
	out := func(urn string, op apitype.OpType) events.EngineEvent {
		return events.EngineEvent{EngineEvent: apitype.EngineEvent{ResOutputsEvent: &apitype.ResOutputsEvent{Metadata: apitype.StepEventMetadata{URN: urn, Op: op}}}}
	}
	t0 := time.Unix(1000, 0)
	evs := []struct {
		ev events.EngineEvent
		at time.Duration
	}{
		{pre("host", apitype.OpRefresh), 0},
		{pre("upgrade", apitype.OpRefresh), 0},
		{out("upgrade", apitype.OpSame), 3 * time.Second},
		{out("host", apitype.OpUpdate), 1 * time.Second},
		{pre("host", apitype.OpSame), 4 * time.Second},
		{out("host", apitype.OpSame), 6 * time.Second},
	}
	reads, steps := newReadClock(), newStepClock()
	for _, e := range evs {
		reads.add(e.ev, t0.Add(e.at))
		steps.add(e.ev, t0.Add(e.at))
	}
	got := reads.slowest(5)
	if len(got) != 2 || got[0].URN != "upgrade" || got[0].Own != 3*time.Second || got[1].URN != "host" || got[1].Own != time.Second {
		t.Errorf("reads: %+v, want upgrade 3s then host 1s", got)
	}
	if got := steps.slowest(1); len(got) != 1 || got[0].URN != "host" || got[0].Own != 2*time.Second {
		t.Errorf("steps: %+v, want host 2s (its step, not its read)", got)
	}
}
