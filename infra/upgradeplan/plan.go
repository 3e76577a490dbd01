// Package upgradeplan plans a Kubernetes upgrade in kubeadm's order from the
// versions the nodes run now. It is pure: the provider reads the versions
// and runs the steps; this decides which steps are due, so an upgrade cut
// off anywhere resumes from where the cluster stands, and never runs
// `kubeadm upgrade apply` again on a node whose control plane already runs
// the new version.
//
// The order keeps the version skew policy at every moment: every control
// plane first (apply on one node, `upgrade node` on the others, one at a
// time), then the control-plane nodes' kubelets one at a time, then the
// workers in batches; a kubelet is never newer than an apiserver that
// serves it.
package upgradeplan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/go-multierror"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/homelab-dev/homelab/roles/containerd"
)

// Node is one node as read before the upgrade.
type Node struct {
	Name         string
	ControlPlane bool
	// ControlPlaneVersion is the oldest version among the node's
	// kube-apiserver, kube-controller-manager and kube-scheduler
	// manifests (control-plane nodes); "" when it has none yet.
	ControlPlaneVersion string
	// Kubelet is the node's kubelet version; "" when none is installed.
	Kubelet string
	// Joined: the node is a member of the cluster. A node yet to join is
	// no part of the upgrade: it joins at the declared version.
	Joined bool
	// Unreachable says why the node could not be read; "" when it was.
	Unreachable string
	// Containerd is the node's containerd version as it prints it
	// (1.7.28, v2.2.9); "" when none was read, and then it is not judged.
	Containerd string
	// CgroupV1: the node runs cgroup v1; KubeletAllowsCgroupV1: its
	// kubelet's configuration says failCgroupV1: false.
	CgroupV1, KubeletAllowsCgroupV1 bool
}

// Input is what a plan is made from.
type Input struct {
	// Target is the declared version, vX.Y.Z.
	Target string
	// ClusterVersion is kubeadm-config's kubernetesVersion: what
	// `kubeadm upgrade apply` last uploaded.
	ClusterVersion string
	// Nodes in a stable order (the provider's: by name): the first
	// control-plane node due runs the apply.
	Nodes []Node
	// MaxUnavailable is how many workers upgrade at once.
	MaxUnavailable int
	// Exclude names nodes the user leaves out of this upgrade (powered
	// off, say); they upgrade on a later up.
	Exclude []string
}

// Action is what a step runs on its nodes.
type Action string

const (
	// Apply: kubeadm at the new version, then `kubeadm upgrade apply`:
	// the node's control plane and etcd, and the cluster's configuration
	// and add-ons.
	Apply Action = "apply"
	// ControlPlane: kubeadm at the new version, then `kubeadm upgrade
	// node`: another control-plane node's control plane and etcd.
	ControlPlane Action = "control-plane"
	// Kubelet: a control-plane node drained, its kubelet and kubectl
	// upgraded and restarted, uncordoned.
	Kubelet Action = "kubelet"
	// Worker: workers drained, `kubeadm upgrade node`, kubelet and
	// kubectl upgraded and restarted, uncordoned.
	Worker Action = "worker"
)

// Step is one step of a plan: one node, or a batch of workers.
type Step struct {
	Action Action
	Nodes  []string
	// From is the version the step moves its nodes from (the oldest of a
	// batch's).
	From string
}

// Plan is the upgrade's steps in order.
type Plan struct {
	From, To string
	Steps    []Step
	// Excluded are joined nodes left behind at an older version.
	Excluded []string
	// Warnings are what the upgrade goes ahead despite: a containerd
	// that containerd's matrix does not test with the target.
	Warnings []string
}

// Empty: nothing is due.
func (p Plan) Empty() bool { return len(p.Steps) == 0 }

// Lines is the plan as preview shows it, one numbered line a step.
func (p Plan) Lines() []string {
	var out []string
	for i, s := range p.Steps {
		out = append(out, fmt.Sprintf("%d. %s: %s", i+1, strings.Join(s.Nodes, ", "), s.describe(p.To)))
	}
	for _, n := range p.Excluded {
		out = append(out, fmt.Sprintf("-  %s: excluded, left as it is; it upgrades on an up that includes it", n))
	}
	for _, w := range p.Warnings {
		out = append(out, "!  "+w)
	}
	return out
}

func (s Step) describe(to string) string {
	switch s.Action {
	case Apply:
		return fmt.Sprintf("kubeadm %s, then kubeadm upgrade apply %s (control plane and etcd %s -> %s, then the cluster's configuration and add-ons)", to, to, s.From, to)
	case ControlPlane:
		return fmt.Sprintf("kubeadm %s, then kubeadm upgrade node (control plane and etcd %s -> %s)", to, s.From, to)
	case Kubelet:
		return fmt.Sprintf("drain, kubelet and kubectl %s -> %s, uncordon", s.From, to)
	default:
		return fmt.Sprintf("drain, kubeadm %s and kubeadm upgrade node, kubelet and kubectl %s -> %s, uncordon", to, s.From, to)
	}
}

// skew is how many minors older than the apiserver a kubelet may be
// (the version skew policy since v1.28).
const skew = 3

// failsCgroupV1 is the first version whose kubelet refuses cgroup v1 by
// default (KEP-5573).
var failsCgroupV1 = version.MustParseSemantic("v1.35.0")

// Make returns the steps due to bring the cluster to in.Target, or every
// reason it refuses to start at once: a skipped minor, a downgrade, a
// kubelet outside the skew the new version allows, a containerd the new
// kubelet cannot run on, a node that could not be read and is not
// excluded. Nothing it refuses has been touched.
func Make(in Input) (Plan, error) {
	var errs *multierror.Error
	fail := func(format string, args ...any) { errs = multierror.Append(errs, fmt.Errorf(format, args...)) }
	to, err := version.ParseSemantic(in.Target)
	if err != nil {
		return Plan{}, fmt.Errorf("the declared version %q: %w", in.Target, err)
	}
	excluded := map[string]bool{}
	for _, name := range in.Exclude {
		if !slices.ContainsFunc(in.Nodes, func(n Node) bool { return n.Name == name }) {
			fail("%s is excluded from the upgrade but is no node of the inventory", name)
		}
		excluded[name] = true
	}
	maxUnavailable := max(in.MaxUnavailable, 1)

	// The nodes that take part, and what each runs.
	type live struct {
		Node
		cp, kubelet *version.Version
	}
	var cps, workers []live
	var unreachable, lagging, cgroupV1, runtimes []string
	plan := Plan{To: in.Target}
	var oldest *version.Version
	for _, n := range in.Nodes {
		if !n.Joined {
			continue
		}
		if excluded[n.Name] {
			plan.Excluded = append(plan.Excluded, n.Name)
			continue
		}
		if n.Unreachable != "" {
			unreachable = append(unreachable, n.Name+" ("+n.Unreachable+")")
			continue
		}
		l := live{Node: n}
		if n.ControlPlane {
			if l.cp = parse(n.ControlPlaneVersion); l.cp == nil {
				fail("%s: its control plane's version cannot be read (%q): is its /etc/kubernetes/manifests intact?", n.Name, n.ControlPlaneVersion)
				continue
			}
			if oldest == nil || l.cp.LessThan(oldest) {
				oldest = l.cp
			}
		}
		if l.kubelet = parse(n.Kubelet); l.kubelet == nil {
			fail("%s: its kubelet's version cannot be read (%q): is the kubelet installed?", n.Name, n.Kubelet)
			continue
		}
		if n.ControlPlane {
			cps = append(cps, l)
		} else {
			workers = append(workers, l)
		}
		if n.CgroupV1 && !n.KubeletAllowsCgroupV1 && !to.LessThan(failsCgroupV1) {
			cgroupV1 = append(cgroupV1, n.Name)
		}
		if n.Containerd != "" && l.kubelet.LessThan(to) {
			// A kubelet due to move: the target's must run on what the
			// node has. Judged now, not when the kubelet fails to start
			// half-way through the plan.
			if v, err := containerd.Supports(n.Containerd, in.Target); err == nil {
				switch v.Support {
				case containerd.Unsupported:
					runtimes = append(runtimes, n.Name+" ("+v.Reason+")")
				case containerd.Untested:
					plan.Warnings = append(plan.Warnings, n.Name+": "+v.Reason)
				}
			}
		}
		if l.kubelet.Major() == to.Major() && l.kubelet.Minor()+skew < to.Minor() {
			lagging = append(lagging, fmt.Sprintf("%s (kubelet %s)", n.Name, n.Kubelet))
		}
		for _, v := range []*version.Version{l.cp, l.kubelet} {
			if v != nil && to.LessThan(v) {
				fail("%s runs %s, newer than the declared %s: kubeadm does not downgrade. Declare %s again (or restore an etcd snapshot taken before the upgrade, docs/etcd.md)", n.Name, v.String(), in.Target, "v"+v.String())
				break
			}
		}
	}
	if len(unreachable) > 0 {
		fail("cannot read %s: an upgrade starts only when every node that is a member can be read. Bring them back, or leave them out of this up explicitly (--upgrade-without %s); they upgrade on a later up",
			strings.Join(unreachable, ", "), strings.Join(namesOf(unreachable), ","))
	}
	if oldest == nil {
		if errs == nil && !slices.ContainsFunc(in.Nodes, func(n Node) bool { return n.Joined }) {
			return plan, nil // no cluster yet: up builds it at the declared version
		}
		if errs == nil {
			fail("no control-plane node of the cluster can be read or takes part: the upgrade starts on one")
		}
		return Plan{}, errs.ErrorOrNil()
	}
	plan.From = "v" + oldest.String()
	if oldest.Major() != to.Major() {
		fail("%s -> %s changes the major version, which kubeadm cannot upgrade", plan.From, in.Target)
	} else if to.Minor() > oldest.Minor()+1 {
		var path []string
		for m := oldest.Minor(); m <= to.Minor(); m++ {
			path = append(path, fmt.Sprintf("v%d.%d", to.Major(), m))
		}
		fail("%s -> %s skips a minor: kubeadm upgrades one minor at a time. Take the path %s: declare the newest patch of v%d.%d, up, and so on",
			plan.From, in.Target, strings.Join(path, " -> "), to.Major(), oldest.Minor()+1)
	}
	if len(cgroupV1) > 0 {
		fail("%s: cgroup v1, which the kubelet refuses from v1.35 on unless its configuration says failCgroupV1: false, and theirs does not: the upgrade would stop with kubelets that do not start. Migrate them to cgroup v2, or set cluster.allowCgroupV1: true and up at the version they run first (every kubelet's configuration then allows it)",
			strings.Join(cgroupV1, ", "))
	}
	if len(runtimes) > 0 {
		fail("%s: the kubelet of %s cannot run on these nodes' containerd, and the upgrade would stop with kubelets that do not start. Upgrade containerd first, under the version the cluster runs now: pin a release both versions run in cluster.containerRuntime.packages (Docker's containerd.io, packages.repository, where the distribution has no 2.x; docs/provisioning.md, \"Container runtime\") and up; then declare %s again",
			strings.Join(runtimes, "; "), in.Target, in.Target)
	}
	if len(lagging) > 0 {
		fail("%s: a kubelet may be at most %d minors older than the apiserver, and %s allows v%d.%d at the oldest; upgrade them to an older minor first",
			strings.Join(lagging, ", "), skew, in.Target, to.Major(), to.Minor()-skew)
	}
	if err := errs.ErrorOrNil(); err != nil {
		return Plan{}, err
	}

	// The apply first, where the cluster's configuration is not yet at
	// the target: on the first control-plane node whose control plane
	// is not (an apply cut off half-way runs again there), else on the
	// first node.
	applied := equal(parse(in.ClusterVersion), to)
	due := func(v *version.Version) bool { return !equal(v, to) }
	if !applied && len(cps) > 0 {
		first := 0
		for i, n := range cps {
			if due(n.cp) {
				first = i
				break
			}
		}
		plan.Steps = append(plan.Steps, Step{Action: Apply, Nodes: []string{cps[first].Name}, From: "v" + cps[first].cp.String()})
		cps[first].cp = to
	}
	for _, n := range cps {
		if due(n.cp) {
			plan.Steps = append(plan.Steps, Step{Action: ControlPlane, Nodes: []string{n.Name}, From: "v" + n.cp.String()})
		}
	}
	for _, n := range cps {
		if due(n.kubelet) {
			plan.Steps = append(plan.Steps, Step{Action: Kubelet, Nodes: []string{n.Name}, From: "v" + n.kubelet.String()})
		}
	}
	var batch Step
	for _, n := range workers {
		if !due(n.kubelet) {
			continue
		}
		if batch.Action == "" {
			batch = Step{Action: Worker, From: "v" + n.kubelet.String()}
		}
		batch.Nodes = append(batch.Nodes, n.Name)
		if v := parse(batch.From); v != nil && n.kubelet.LessThan(v) {
			batch.From = "v" + n.kubelet.String()
		}
		if len(batch.Nodes) == maxUnavailable {
			plan.Steps = append(plan.Steps, batch)
			batch = Step{}
		}
	}
	if len(batch.Nodes) > 0 {
		plan.Steps = append(plan.Steps, batch)
	}
	return plan, nil
}

func parse(v string) *version.Version {
	sv, err := version.ParseSemantic(v)
	if err != nil {
		return nil
	}
	return sv
}

func equal(a, b *version.Version) bool { return a != nil && b != nil && a.EqualTo(b) }

// namesOf keeps the node names of "name (why)" entries.
func namesOf(entries []string) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i], _, _ = strings.Cut(e, " ")
	}
	return out
}
