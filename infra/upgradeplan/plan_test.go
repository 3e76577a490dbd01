package upgradeplan

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

// lab is the default shape: three control-plane nodes, four workers, all
// at from.
func lab(from string) []Node {
	var nodes []Node
	for i := 1; i <= 3; i++ {
		nodes = append(nodes, Node{Name: fmt.Sprintf("cp-%d", i), ControlPlane: true, ControlPlaneVersion: from, Kubelet: from, Joined: true})
	}
	for i := 1; i <= 4; i++ {
		nodes = append(nodes, Node{Name: fmt.Sprintf("gpu-%d", i), Kubelet: from, Joined: true})
	}
	return nodes
}

func withContainerd(nodes []Node, v string) []Node {
	nodes = slices.Clone(nodes)
	for i := range nodes {
		nodes[i].Containerd = v
	}
	return nodes
}

func with(nodes []Node, name string, edit func(*Node)) []Node {
	nodes = slices.Clone(nodes)
	for i := range nodes {
		if nodes[i].Name == name {
			edit(&nodes[i])
		}
	}
	return nodes
}

func steps(p Plan) []string {
	var out []string
	for _, s := range p.Steps {
		out = append(out, string(s.Action)+" "+strings.Join(s.Nodes, ","))
	}
	return out
}

func TestMake(t *testing.T) {
	const from, to = "v1.34.4", "v1.35.4"
	fresh := []string{"apply cp-1", "control-plane cp-2", "control-plane cp-3", "kubelet cp-1", "kubelet cp-2", "kubelet cp-3",
		"worker gpu-1", "worker gpu-2", "worker gpu-3", "worker gpu-4"}
	for _, tc := range []struct {
		name    string
		in      Input
		want    []string
		excl    []string
		refuses []string // words every refusal must hold, in order of the errors
	}{
		{name: "fresh upgrade, kubeadm's order", in: Input{Target: to, ClusterVersion: from, Nodes: lab(from)}, want: fresh},
		{name: "patch upgrade takes the same path", in: Input{Target: "v1.34.6", ClusterVersion: from, Nodes: lab(from)},
			want: fresh},
		{name: "nothing due", in: Input{Target: to, ClusterVersion: to, Nodes: lab(to)}},
		{name: "no cluster yet", in: Input{Target: to}},
		{name: "nodes yet to join are no part of it", in: Input{Target: to, ClusterVersion: to,
			Nodes: with(lab(to), "gpu-4", func(n *Node) { n.Joined, n.Kubelet = false, "" })}},
		{name: "workers in batches", in: Input{Target: to, ClusterVersion: from, Nodes: lab(from), MaxUnavailable: 3},
			want: append(slices.Clone(fresh[:6]), "worker gpu-1,gpu-2,gpu-3", "worker gpu-4")},
		{name: "resumed after the apply: no second apply", in: Input{Target: to, ClusterVersion: to,
			Nodes: with(lab(from), "cp-1", func(n *Node) { n.ControlPlaneVersion = to })},
			want: fresh[1:]},
		{name: "apply on the first node not yet upgraded", in: Input{Target: to, ClusterVersion: from,
			Nodes: with(lab(from), "cp-1", func(n *Node) { n.ControlPlaneVersion, n.Kubelet = to, to })},
			want: []string{"apply cp-2", "control-plane cp-3", "kubelet cp-2", "kubelet cp-3", "worker gpu-1", "worker gpu-2", "worker gpu-3", "worker gpu-4"}},
		{name: "resumed among the workers", in: Input{Target: to, ClusterVersion: to,
			Nodes: with(with(lab(to), "gpu-3", func(n *Node) { n.Kubelet = from }), "gpu-4", func(n *Node) { n.Kubelet = from })},
			want: []string{"worker gpu-3", "worker gpu-4"}},
		{name: "an excluded node is left out and said so", in: Input{Target: to, ClusterVersion: from, Exclude: []string{"cp-3"},
			Nodes: with(lab(from), "cp-3", func(n *Node) { n.Unreachable = "no route to host" })},
			want: []string{"apply cp-1", "control-plane cp-2", "kubelet cp-1", "kubelet cp-2", "worker gpu-1", "worker gpu-2", "worker gpu-3", "worker gpu-4"},
			excl: []string{"cp-3"}},
		{name: "an excluded node back later upgrades then", in: Input{Target: to, ClusterVersion: to,
			Nodes: with(lab(to), "cp-3", func(n *Node) { n.ControlPlaneVersion, n.Kubelet = from, from })},
			want: []string{"control-plane cp-3", "kubelet cp-3"}},
		{name: "a skipped minor names the path", in: Input{Target: "v1.36.1", ClusterVersion: from, Nodes: lab(from)},
			refuses: []string{"skips a minor", "v1.34 -> v1.35 -> v1.36"}},
		{name: "a downgrade", in: Input{Target: "v1.34.2", ClusterVersion: from, Nodes: lab(from)},
			refuses: []string{"cp-1", "newer than the declared v1.34.2", "does not downgrade"}},
		{name: "an unreachable node, not excluded", in: Input{Target: to, ClusterVersion: from,
			Nodes: with(lab(from), "cp-2", func(n *Node) { n.Unreachable = "connection refused" })},
			refuses: []string{"cp-2 (connection refused)", "--upgrade-without cp-2"}},
		{name: "a kubelet outside the skew", in: Input{Target: to, ClusterVersion: from,
			Nodes: with(lab(from), "gpu-2", func(n *Node) { n.Kubelet = "v1.31.0" })},
			refuses: []string{"gpu-2 (kubelet v1.31.0)", "v1.32"}},
		{name: "cgroup v1 without the kubelet's consent, to v1.35", in: Input{Target: to, ClusterVersion: from,
			Nodes: with(with(lab(from), "gpu-3", func(n *Node) { n.CgroupV1 = true }), "gpu-4", func(n *Node) { n.CgroupV1, n.KubeletAllowsCgroupV1 = true, true })},
			refuses: []string{"gpu-3: cgroup v1", "cluster.allowCgroupV1"}},
		{name: "cgroup v1 with the kubelet's consent", in: Input{Target: to, ClusterVersion: from,
			Nodes: with(lab(from), "gpu-3", func(n *Node) { n.CgroupV1, n.KubeletAllowsCgroupV1 = true, true })}, want: fresh},
		{name: "cgroup v1 on a patch of v1.34", in: Input{Target: "v1.34.6", ClusterVersion: from,
			Nodes: with(lab(from), "gpu-3", func(n *Node) { n.CgroupV1 = true })}, want: fresh},
		{name: "containerd 1.x under v1.36", in: Input{Target: "v1.36.1", ClusterVersion: to,
			Nodes: with(with(withContainerd(lab(to), "v2.2.9"), "gpu-2", func(n *Node) { n.Containerd = "1.7.28" }), "gpu-3", func(n *Node) { n.Containerd = "1.6.20~ds1" })},
			refuses: []string{"gpu-2 (", "containerd 1.7.28", "gpu-3 (", "cluster.containerRuntime.packages", "declare v1.36.1 again"}},
		{name: "containerd 1.x on a node already at the target is not the upgrade's", in: Input{Target: "v1.36.1", ClusterVersion: "v1.36.1",
			Nodes: with(with(withContainerd(lab("v1.36.1"), "v2.2.9"), "gpu-2", func(n *Node) { n.Containerd = "1.7.28" }), "gpu-3", func(n *Node) { n.Kubelet = to })},
			want: []string{"worker gpu-3"}},
		{name: "containerd 1.x under v1.35, an excluded node's unread", in: Input{Target: to, ClusterVersion: from, Exclude: []string{"gpu-4"},
			Nodes: with(withContainerd(lab(from), "1.7.28"), "gpu-4", func(n *Node) { n.Containerd = "1.6.9" })},
			want: fresh[:9], excl: []string{"gpu-4"}},
		{name: "every control-plane node excluded", in: Input{Target: to, ClusterVersion: from, Exclude: []string{"cp-1", "cp-2", "cp-3"}, Nodes: lab(from)},
			refuses: []string{"no control-plane node"}},
		{name: "every problem at once", in: Input{Target: "v1.36.0", ClusterVersion: from, Exclude: []string{"nas"},
			Nodes: with(lab(from), "gpu-1", func(n *Node) { n.Unreachable = "timeout" })},
			refuses: []string{"nas", "gpu-1 (timeout)", "v1.34 -> v1.35 -> v1.36"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Make(tc.in)
			if len(tc.refuses) > 0 {
				if err == nil {
					t.Fatalf("planned %v, want a refusal", steps(p))
				}
				msg := err.Error()
				for _, w := range tc.refuses {
					i := strings.Index(msg, w)
					if i < 0 {
						t.Errorf("refusal lacks %q:\n%s", w, msg)
						continue
					}
					msg = msg[i+len(w):]
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := steps(p); !slices.Equal(got, tc.want) {
				t.Errorf("steps\n got %q\nwant %q", got, tc.want)
			}
			if !slices.Equal(p.Excluded, tc.excl) {
				t.Errorf("excluded %v, want %v", p.Excluded, tc.excl)
			}
			if p.Empty() != (len(tc.want) == 0) {
				t.Errorf("Empty() = %v with %d steps", p.Empty(), len(p.Steps))
			}
		})
	}
}

// TestMakeWarnsOfAnUntestedContainerd: Debian 12's containerd runs v1.35
// though containerd's matrix does not list it; the plan goes ahead and
// says so per node, and a node whose kubelet is not due is not named.
func TestMakeWarnsOfAnUntestedContainerd(t *testing.T) {
	nodes := with(withContainerd(lab("v1.34.4"), "1.7.28"), "gpu-1", func(n *Node) { n.Containerd = "1.6.20~ds1" })
	p, err := Make(Input{Target: "v1.35.4", ClusterVersion: "v1.34.4", Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Warnings) != 1 || !strings.HasPrefix(p.Warnings[0], "gpu-1: ") || !strings.Contains(p.Warnings[0], "1.6.20") {
		t.Errorf("warnings %q, want one naming gpu-1 and its containerd", p.Warnings)
	}
	if l := p.Lines(); !strings.HasPrefix(l[len(l)-1], "!  gpu-1: ") {
		t.Errorf("the plan's lines end %q, not with the warning", l[len(l)-1])
	}
	nodes = with(nodes, "gpu-1", func(n *Node) { n.Kubelet = "v1.35.4" })
	if p, err := Make(Input{Target: "v1.35.4", ClusterVersion: "v1.35.4", Nodes: nodes}); err != nil || len(p.Warnings) != 0 {
		t.Errorf("gpu-1's kubelet not due: warnings %q, %v", p.Warnings, err)
	}
}

// TestPlannedKeepsTheSkew walks each plan step by step and checks, after
// every step, that no kubelet is newer than any control plane (the
// apiservers it may reach through the endpoint), and that at the end
// every node runs the target.
func TestPlannedKeepsTheSkew(t *testing.T) {
	const to = "v1.35.4"
	starts := map[string][]Node{
		"fresh":                 lab("v1.34.4"),
		"mixed patches":         with(lab("v1.34.4"), "gpu-2", func(n *Node) { n.Kubelet = "v1.33.7" }),
		"resumed after cp-1":    with(lab("v1.34.4"), "cp-1", func(n *Node) { n.ControlPlaneVersion = to }),
		"cp kubelet done early": with(with(lab("v1.34.4"), "cp-1", func(n *Node) { n.ControlPlaneVersion = to }), "cp-2", func(n *Node) { n.ControlPlaneVersion = to }),
	}
	for name, nodes := range starts {
		for _, maxU := range []int{1, 2, 4} {
			p, err := Make(Input{Target: to, ClusterVersion: "v1.34.4", Nodes: nodes, MaxUnavailable: maxU})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			state := map[string]*Node{}
			for i := range nodes {
				n := nodes[i]
				state[n.Name] = &n
			}
			check := func(after string) {
				for _, k := range state {
					for _, c := range state {
						if c.ControlPlane && version.MustParseSemantic(c.ControlPlaneVersion).LessThan(version.MustParseSemantic(k.Kubelet)) {
							t.Errorf("%s maxUnavailable %d, after %s: %s's kubelet %s is newer than %s's control plane %s", name, maxU, after, k.Name, k.Kubelet, c.Name, c.ControlPlaneVersion)
						}
					}
				}
			}
			check("nothing")
			for _, s := range p.Steps {
				if s.Action == Worker && len(s.Nodes) > maxU {
					t.Errorf("%s: a batch of %d workers with maxUnavailable %d", name, len(s.Nodes), maxU)
				}
				for _, n := range s.Nodes {
					switch s.Action {
					case Apply, ControlPlane:
						state[n].ControlPlaneVersion = to
					default:
						state[n].Kubelet = to
					}
				}
				check(string(s.Action) + " " + strings.Join(s.Nodes, ","))
			}
			for _, n := range state {
				if n.Kubelet != to || (n.ControlPlane && n.ControlPlaneVersion != to) {
					t.Errorf("%s: after the plan %s runs kubelet %s, control plane %q", name, n.Name, n.Kubelet, n.ControlPlaneVersion)
				}
			}
		}
	}
}

func TestLinesSayWhatRunsWhere(t *testing.T) {
	p, err := Make(Input{Target: "v1.35.4", ClusterVersion: "v1.34.4", Nodes: lab("v1.34.4"), Exclude: []string{"gpu-4"}})
	if err != nil {
		t.Fatal(err)
	}
	lines := p.Lines()
	if len(lines) != len(p.Steps)+1 {
		t.Fatalf("%d lines for %d steps and one excluded node:\n%s", len(lines), len(p.Steps), strings.Join(lines, "\n"))
	}
	for i, want := range map[int]string{0: "1. cp-1: kubeadm v1.35.4, then kubeadm upgrade apply v1.35.4", 1: "2. cp-2: kubeadm v1.35.4, then kubeadm upgrade node",
		3: "4. cp-1: drain, kubelet and kubectl v1.34.4 -> v1.35.4", len(lines) - 1: "gpu-4: excluded"} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d = %q, want it to hold %q", i+1, lines[i], want)
		}
	}
}
