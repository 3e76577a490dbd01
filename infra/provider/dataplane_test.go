package provider

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/pulumi/pulumi-go-provider/infer"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestKubeProxyDone(t *testing.T) {
	cases := []struct {
		status string
		want   bool
	}{
		{"", false},
		{"1 1 7 7 7 7", true},
		{"1 1 7 7 7 3", false},
		{"1 1 7 7 7", false},   // numberAvailable absent while none is
		{"2 1 7 7 7 7", false}, // the controller has not seen the new spec
		{"1 1 7 5 5 5", false},
		{"1 1 0 0 0 0", false}, // no node counted yet
	}
	for _, tc := range cases {
		if got := kubeProxyDone(tc.status); got != tc.want {
			t.Errorf("kubeProxyDone(%q) = %v", tc.status, got)
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
		{"kube-proxy and Cilium as the CNI: converged", args("none", off), DataplaneState{DataplaneArgs: args("none", off), KubeProxy: true, ReleasePresent: true, ReleaseValues: canonical(off)}, nil},
		{"kube-proxy without a pod network (an older homelab's)", args("none", off), DataplaneState{DataplaneArgs: args("none", off), KubeProxy: true},
			[]string{"releasePresent", "values"}},
		{"kube-proxy deleted by hand", args("none", off), DataplaneState{DataplaneArgs: args("none", off), ReleasePresent: true, ReleaseValues: canonical(off)}, []string{"kubeProxy"}},
		{"a node lost its CNI configuration", args("none", off), DataplaneState{DataplaneArgs: args("none", off), KubeProxy: true, ReleasePresent: true, ReleaseValues: canonical(off),
			NetworkNotReady: []string{"gpu-2"}}, []string{"networkNotReady"}},
		{"bring your own CNI", func() DataplaneArgs { a := args("none", off); a.CNI = "none"; return a }(),
			DataplaneState{DataplaneArgs: func() DataplaneArgs { a := args("none", off); a.CNI = "none"; return a }(), KubeProxy: true, NetworkNotReady: []string{"gpu-2"}}, nil},
		{"swap to Cilium", args("cilium", on), DataplaneState{DataplaneArgs: args("none", off), KubeProxy: true},
			[]string{"kubeProxy", "releasePresent", "replacement", "values"}},
		{"Cilium converged, values formatted differently", args("cilium", yamlOn), DataplaneState{DataplaneArgs: args("cilium", on), ReleasePresent: true, ReleaseValues: canonical(on)}, nil},
		{"stale rules on a node", args("cilium", on), DataplaneState{DataplaneArgs: args("cilium", on), ReleasePresent: true, ReleaseValues: canonical(on), StaleRules: []string{"gpu-4"}}, []string{"staleRules"}},
		{"swap back", args("none", off), DataplaneState{DataplaneArgs: args("cilium", on), ReleasePresent: true, ReleaseValues: canonical(on)},
			[]string{"kubeProxy", "replacement", "values"}},
		{"rebuilt chart archive", func() DataplaneArgs { a := args("cilium", on); a.ChartSha = "b"; return a }(),
			DataplaneState{DataplaneArgs: args("cilium", on), ReleasePresent: true, ReleaseValues: canonical(on)}, []string{"chart"}},
		{"a cluster kubeadm init made anew", func() DataplaneArgs { a := args("cilium", on); a.ClusterUID = "new"; return a }(),
			DataplaneState{DataplaneArgs: func() DataplaneArgs { a := args("cilium", on); a.ClusterUID = "old"; return a }(), ReleasePresent: true, ReleaseValues: canonical(on)}, []string{"cluster"}},
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
	for _, cni := range []string{"", "none"} {
		for _, r := range []string{"none", "cilium"} {
			in := DataplaneArgs{Replacement: r, CNI: cni, Values: "kubeProxyReplacement: true\n"}
			for _, old := range []DataplaneState{{}, {ReleasePresent: true}, {NetworkNotReady: []string{"gpu-1"}}} {
				st := desiredDataplane(in, old)
				if d := dataplaneChanges(in, st); len(d) > 0 {
					t.Errorf("%s, cni %q from %+v: planned state still differs: %v", r, cni, old, d)
				}
			}
		}
	}
}

func node(name string, status corev1.ConditionStatus, reason, msg string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: reason, Message: msg}}
	return n
}

func TestNetworkNotReady(t *testing.T) {
	nodes := []corev1.Node{
		node("cp-1", corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
		node("gpu-1", corev1.ConditionFalse, "KubeletNotReady", "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"),
		node("gpu-2", corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status."),
	}
	if got := networkNotReady(nodes, []string{"gpu-3", "gpu-2", "gpu-1", "cp-1"}); !slices.Equal(got, []string{"gpu-1"}) {
		t.Errorf("nodes without a pod network: %v", got)
	}
}

func TestAgentsRolledOut(t *testing.T) {
	ds := func(gen, observed int64, desired, updated, ready, unavailable int32) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Generation: gen}, Status: appsv1.DaemonSetStatus{ObservedGeneration: observed,
			DesiredNumberScheduled: desired, UpdatedNumberScheduled: updated, NumberReady: ready, NumberUnavailable: unavailable}}
	}
	for _, tc := range []struct {
		name string
		ds   *appsv1.DaemonSet
		want bool
	}{
		{"every agent ready", ds(2, 2, 7, 7, 7, 0), true},
		{"new template not seen", ds(3, 2, 7, 7, 7, 0), false},
		{"two agents restarting (Helm's wait would pass)", ds(2, 2, 7, 7, 5, 2), false},
		{"old agents ready, not updated", ds(2, 2, 7, 5, 7, 0), false},
		{"no node yet", ds(1, 1, 0, 0, 0, 0), false},
	} {
		if got, desc := agentsRolledOut(tc.ds); got != tc.want {
			t.Errorf("%s: %v (%s)", tc.name, got, desc)
		}
	}
}

// Uninstalling the pod network cuts every pod's network: refused without
// consent for every node, done (here: nothing to reach) with it.
func TestDataplaneDeleteNeedsConsentForAll(t *testing.T) {
	lab := newFakeLab(t)
	// Consented, it goes on to a node that cannot be reached: warned
	// about, not an error.
	lab.node("cp-1").dialErr = unreachableErr("cp-1")
	st := DataplaneState{DataplaneArgs: DataplaneArgs{CNI: "cilium", Via: lab.conn("cp-1")}}
	for consent, refusedWant := range map[string]bool{"": true, "cp-1": true, "*": false} {
		lab.config().allowDestroy = nodeList(consent)
		_, err := Dataplane{}.Delete(lab.ctx(), infer.DeleteRequest[DataplaneState]{State: st})
		if refusedWant != (err != nil && strings.Contains(err.Error(), RefusedMarker)) {
			t.Errorf("consent %q: %v", consent, err)
		}
	}
	lab.config().allowDestroy = ""
	if _, err := (Dataplane{}).Delete(lab.ctx(), infer.DeleteRequest[DataplaneState]{State: DataplaneState{DataplaneArgs: DataplaneArgs{CNI: "none"}}}); err != nil {
		t.Errorf("cni none: nothing to uninstall, yet %v", err)
	}
}
