package provider

import (
	"maps"
	"slices"
	"testing"
)

func TestKubeProxyDone(t *testing.T) {
	cases := []struct {
		status, wait string
		want         bool
	}{
		{"", WaitReady, false},
		{"1 1 7 7 7 7", WaitReady, true},
		{"1 1 7 7 7 3", WaitReady, false},
		{"1 1 7 7 7", WaitScheduled, true}, // numberAvailable absent while none is
		{"1 1 7 7 7 0", "", false},         // the default is ready
		{"2 1 7 7 7 7", WaitReady, false},  // the controller has not seen the new spec
		{"1 1 7 5 5 5", WaitScheduled, false},
		{"1 1 0 0 0 0", WaitScheduled, false}, // no node counted yet
	}
	for _, tc := range cases {
		if got := kubeProxyDone(tc.status, tc.wait); got != tc.want {
			t.Errorf("kubeProxyDone(%q, %q) = %v", tc.status, tc.wait, got)
		}
	}
}

func TestDataplaneChanges(t *testing.T) {
	on := `{"kubeProxyReplacement":true,"k8sServiceHost":"10.0.0.100","k8sServicePort":6443}`
	off := `{"kubeProxyReplacement":false,"k8sServiceHost":"10.0.0.100","k8sServicePort":6443}`
	args := func(r, values string) DataplaneArgs {
		return DataplaneArgs{Replacement: r, Values: values, Chart: "/srv/cilium.tgz", ChartSha: "a"}
	}
	yamlOn := "kubeProxyReplacement: true\nk8sServicePort: 6443\nk8sServiceHost: 10.0.0.100\n"
	cases := []struct {
		name string
		in   DataplaneArgs
		st   DataplaneState
		want []string
	}{
		{"kube-proxy, no Cilium: converged", args("none", off), DataplaneState{DataplaneArgs: args("none", off), KubeProxy: true}, nil},
		{"kube-proxy deleted by hand", args("none", off), DataplaneState{DataplaneArgs: args("none", off)}, []string{"kubeProxy"}},
		{"swap to Cilium", args("cilium", on), DataplaneState{DataplaneArgs: args("none", off), KubeProxy: true},
			[]string{"kubeProxy", "releasePresent", "replacement", "values"}},
		{"Cilium converged, values formatted differently", args("cilium", yamlOn), DataplaneState{DataplaneArgs: args("cilium", on), ReleasePresent: true, ReleaseValues: canonical(on)}, nil},
		{"stale rules on a node", args("cilium", on), DataplaneState{DataplaneArgs: args("cilium", on), ReleasePresent: true, ReleaseValues: canonical(on), StaleRules: []string{"gpu-4"}}, []string{"staleRules"}},
		{"swap back", args("none", off), DataplaneState{DataplaneArgs: args("cilium", on), ReleasePresent: true, ReleaseValues: canonical(on)},
			[]string{"kubeProxy", "replacement", "values"}},
		{"rebuilt chart archive", func() DataplaneArgs { a := args("cilium", on); a.ChartSha = "b"; return a }(),
			DataplaneState{DataplaneArgs: args("cilium", on), ReleasePresent: true, ReleaseValues: canonical(on)}, []string{"chart"}},
		{"a node added changes nothing", func() DataplaneArgs { a := args("cilium", on); a.Nodes = []Connection{{Node: "gpu-5"}}; return a }(),
			DataplaneState{DataplaneArgs: args("cilium", on), ReleasePresent: true, ReleaseValues: canonical(on)}, nil},
	}
	for _, tc := range cases {
		got := slices.Sorted(maps.Keys(dataplaneChanges(tc.in, tc.st)))
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: changes %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A preview's planned state must read back the same after the real run,
// or every up after a swap would show a change.
func TestDesiredDataplaneIsConverged(t *testing.T) {
	for _, r := range []string{"none", "cilium"} {
		in := DataplaneArgs{Replacement: r, Values: "kubeProxyReplacement: true\n"}
		for _, old := range []DataplaneState{{}, {ReleasePresent: true}} {
			st := desiredDataplane(in, old)
			if d := dataplaneChanges(in, st); len(d) > 0 {
				t.Errorf("%s from %+v: planned state still differs: %v", r, old, d)
			}
		}
	}
}
