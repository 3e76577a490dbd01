package main

import (
	"testing"
	"time"
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
