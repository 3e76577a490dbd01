package provider

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"
	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/homelab-dev/homelab/infra/envvars"
	"github.com/homelab-dev/homelab/infra/etcdbackup"
	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/nodeprobes"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/infra/upgradeplan"
	"github.com/homelab-dev/homelab/roles/etcdsnapshot"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// KubernetesUpgrade moves a running cluster to the declared Kubernetes
// version in kubeadm's order (infra/upgradeplan decides the steps from what
// each node runs). It runs before the nodes' packages are converged: by
// the time they are, every node it upgraded holds the declared version.
type KubernetesUpgrade struct{}

// EnvUpgradeWithout names nodes (comma-separated) the user leaves out of
// this run's upgrade, a powered-off one, say: read from the environment so
// that it never outlives the command, as the consent to destroy.
const EnvUpgradeWithout = envvars.UpgradeWithout

type KubernetesUpgradeArgs struct {
	// ControlPlanes and Workers are every node's connection, in name
	// order (the first control-plane node due runs the apply). Lists of connections: a connection nested in an object of a
	// list reached the state with its key in plain text.
	ControlPlanes []Connection `pulumi:"controlPlanes"`
	Workers       []Connection `pulumi:"workers,optional"`
	// Target is the declared version (vX.Y.Z).
	Target         string `pulumi:"kubernetesVersion"`
	MaxUnavailable int    `pulumi:"maxUnavailable,optional"`
	// DrainTimeout bounds each node's drain (a Go duration).
	DrainTimeout    string   `pulumi:"drainTimeout"`
	IgnorePreflight []string `pulumi:"ignorePreflight,optional"`
	// Repository is the Kubernetes packages' repository for the target's
	// minor; nil when the user installs the packages (up then refuses to
	// upgrade: the kubelet must move after its control plane, not before).
	Repository *AptRepository `pulumi:"repository,optional"`
	Port       int            `pulumi:"port"`
	// Endpoint is the controlPlaneEndpoint (host:port), through which the
	// API must answer after every step.
	Endpoint string `pulumi:"endpoint"`
}

// NodeVersions is what a node runs, as last read.
type NodeVersions struct {
	ControlPlane string `pulumi:"controlPlane,optional"`
	Kubelet      string `pulumi:"kubelet,optional"`
	KubeletStamp string `pulumi:"kubeletStamp,optional"`
	// Containerd decides whether the target's kubelet can run on the
	// node (containerd.Supports).
	Containerd      string `pulumi:"containerd,optional"`
	ContainerdStamp string `pulumi:"containerdStamp,optional"`
	Joined          bool   `pulumi:"joined"`
	// CgroupV1 without KubeletAllowsCgroupV1 stops an upgrade to v1.35.
	CgroupV1              bool `pulumi:"cgroupV1,optional"`
	KubeletAllowsCgroupV1 bool `pulumi:"kubeletAllowsCgroupV1,optional"`
}

type KubernetesUpgradeState struct {
	KubernetesUpgradeArgs
	// Reached is the version the last run left the cluster at (the
	// target, once every node taking part runs it).
	Reached string `pulumi:"reached,optional"`
	// Live is each node's versions as last read, by node.
	Live map[string]NodeVersions `pulumi:"live,optional"`
	// ClusterVersion is kubeadm-config's kubernetesVersion, as last read.
	ClusterVersion string `pulumi:"clusterVersion,optional"`
}

func (in *KubernetesUpgradeArgs) Annotate(a infer.Annotator) {
	a.Describe(&in.ControlPlanes, "Every control-plane node's connection, in name order: the first one due runs kubeadm upgrade apply.")
	a.Describe(&in.Workers, "Every worker's connection, in name order.")
	a.Describe(&in.Target, "The declared Kubernetes version (vX.Y.Z).")
	a.Describe(&in.MaxUnavailable, "How many workers are drained and upgraded at once (default 1).")
	a.Describe(&in.DrainTimeout, "How long a node's drain may take (a Go duration); past it the upgrade stops and names the pods left.")
	a.Describe(&in.IgnorePreflight, "kubeadm preflight checks to skip.")
	a.Describe(&in.Repository, "The Kubernetes packages' apt repository for the declared minor; absent when the user installs the packages, and then up refuses to upgrade.")
	a.Describe(&in.Port, "The apiserver's port.")
	a.Describe(&in.Endpoint, "The controlPlaneEndpoint (host:port), through which the API must answer after every step.")
}

func (v *NodeVersions) Annotate(a infer.Annotator) {
	a.Describe(&v, "What a node runs, as last read.")
	a.Describe(&v.ControlPlane, "The oldest version among the node's control-plane manifests (control-plane nodes).")
	a.Describe(&v.Kubelet, "The node's kubelet version.")
	a.Describe(&v.KubeletStamp, "The file the kubelet's version was read from: path, inode, size, change and modification times. A refresh runs the kubelet for its version only when this changed.")
	a.Describe(&v.Containerd, "The node's containerd version, as containerd prints it.")
	a.Describe(&v.ContainerdStamp, "The file containerd's version was read from, as kubeletStamp.")
	a.Describe(&v.Joined, "Whether the node is a member of the cluster (its kubeadm init or join completed).")
	a.Describe(&v.CgroupV1, "Whether the node runs cgroup v1.")
	a.Describe(&v.KubeletAllowsCgroupV1, "Whether the kubelet's configuration says failCgroupV1: false.")
}

func (st *KubernetesUpgradeState) Annotate(a infer.Annotator) {
	a.Describe(&st.Reached, "The version the last run left the cluster at.")
	a.Describe(&st.Live, "Each node's versions, as last read, by node.")
	a.Describe(&st.ClusterVersion, "kubeadm-config's kubernetesVersion, as last read.")
}

func (u *KubernetesUpgrade) Annotate(a infer.Annotator) {
	a.Describe(&u, "The cluster's Kubernetes version: when the declared one is newer than what the nodes run, kubeadm's upgrade in its order (apply on one control-plane node, upgrade node on the others one at a time, their kubelets, then the workers drained in batches), every step checked, resumable from what the nodes run.")
	a.SetToken("index", "KubernetesUpgrade")
}

func (in KubernetesUpgradeArgs) conns() []Connection {
	return append(append([]Connection{}, in.ControlPlanes...), in.Workers...)
}

// planOf plans from the state's versions; unread nodes say why.
func planOf(ctx context.Context, in KubernetesUpgradeArgs, live map[string]NodeVersions, unread map[string]string, clusterVersion string) (upgradeplan.Plan, error) {
	return planWithout(in, live, unread, clusterVersion, configOf(ctx).upgradeWithout)
}

func planWithout(in KubernetesUpgradeArgs, live map[string]NodeVersions, unread map[string]string, clusterVersion string, without []string) (upgradeplan.Plan, error) {
	var nodes []upgradeplan.Node
	for i, c := range in.conns() {
		v := live[c.Node]
		n := upgradeplan.Node{Name: c.Node, ControlPlane: i < len(in.ControlPlanes), ControlPlaneVersion: v.ControlPlane, Kubelet: v.Kubelet, Joined: v.Joined,
			Containerd: v.Containerd, CgroupV1: v.CgroupV1, KubeletAllowsCgroupV1: v.KubeletAllowsCgroupV1}
		if why, ok := unread[c.Node]; ok {
			// A node never read counts as a member: whether it is one
			// is what could not be read.
			n.Unreachable, n.Joined = why, true
		}
		nodes = append(nodes, n)
	}
	return upgradeplan.Make(upgradeplan.Input{Target: in.Target, ClusterVersion: clusterVersion, Nodes: nodes, MaxUnavailable: in.MaxUnavailable, Exclude: without})
}

// upgradeChanges: a declared version other than the one the last run
// reached, or nodes the last read found behind it (one left out earlier,
// now back), leaving out the nodes this run leaves out. Which nodes, how
// many at once and through which node are means, never a change.
func upgradeChanges(in KubernetesUpgradeArgs, st KubernetesUpgradeState, without []string) changeSet {
	d := changeSet{}
	if in.Target != st.Reached {
		d.update("kubernetesVersion")
		return d
	}
	if plan, err := planWithout(in, st.Live, nil, st.ClusterVersion, without); err != nil || !plan.Empty() {
		d.update("kubernetesVersion")
	}
	return d
}

// Diff says what the upgrade will run, from the nodes' versions as last
// read (a refresh reads them again), as the preview shows it.
func (KubernetesUpgrade) Diff(ctx context.Context, req infer.DiffRequest[KubernetesUpgradeArgs, KubernetesUpgradeState]) (infer.DiffResponse, error) {
	d := upgradeChanges(req.Inputs, req.State, configOf(ctx).upgradeWithout)
	if len(d) > 0 {
		live, unread, cv := req.State.Live, map[string]string(nil), req.State.ClusterVersion
		if !anyJoined(live) {
			// A first build reads the nodes before kubeadm init, so its
			// state knows no member until a refresh: read them now (read
			// only) rather than show an empty plan.
			if l, u, c, err := survey(reading(ctx), req.Inputs, nil); err == nil {
				live, unread, cv = l, u, c
			}
		}
		say(ctx, req.Inputs, live, unread, cv)
	}
	return d.diff(false), nil
}

// say logs the plan, or why up would refuse it.
func say(ctx context.Context, in KubernetesUpgradeArgs, live map[string]NodeVersions, unread map[string]string, clusterVersion string) {
	p.GetLogger(ctx).Warning(planText(in, live, unread, clusterVersion, configOf(ctx).upgradeWithout))
}

// UpgradeSays marks the line Diff logs for a planned upgrade: the
// preview's change carries that line, so the plan is the one Diff made
// from the refreshed versions, not one remade from an older state.
const UpgradeSays = "UPGRADES Kubernetes"

// RefusalSays marks the line Diff logs for an upgrade up would refuse.
const RefusalSays = "up would REFUSE to upgrade"

// planText is what the preview says of the upgrade: the plan in order, or
// why up would refuse it.
func planText(in KubernetesUpgradeArgs, live map[string]NodeVersions, unread map[string]string, clusterVersion string, without []string) string {
	plan, err := planWithout(in, live, unread, clusterVersion, without)
	switch {
	case err != nil:
		return fmt.Sprintf("%s to %s, before changing anything: %v", RefusalSays, in.Target, err)
	case plan.Empty():
		return fmt.Sprintf("%s to %s where the members run an older version; the plan is made from what they run when up starts (a preview with refresh shows it)", UpgradeSays, in.Target)
	}
	return fmt.Sprintf("%s %s -> %s, in this order:\n%s", UpgradeSays, plan.From, plan.To, strings.Join(plan.Lines(), "\n"))
}

func anyJoined(live map[string]NodeVersions) bool {
	for _, v := range live {
		if v.Joined {
			return true
		}
	}
	return false
}

// survey reads every node's versions and, through the first control-plane
// node whose API answers, kubeadm-config's version. Nodes that cannot be
// read are in unread, with why. A kubelet whose stamp is the one known
// (a refresh's last read) keeps its version without being run.
func survey(ctx context.Context, in KubernetesUpgradeArgs, known map[string]NodeVersions) (live map[string]NodeVersions, unread map[string]string, clusterVersion string, err error) {
	live, unread = map[string]NodeVersions{}, map[string]string{}
	type versionsRead struct {
		v   nodefacts.Versions
		err error
	}
	conns := in.conns()
	read := eachNode(conns, func(conn Connection) versionsRead {
		v, err, failed := readOnce(ctx, conn, func(c ssh.Executor) (nodefacts.Versions, error) {
			out, _, err := query(ctx, c, nodeprobes.Versions(known[conn.Node].known()...))
			return nodefacts.ParseVersions(out), err
		})
		if failed && err == nil {
			err = fmt.Errorf("%s: not read", conn.Node)
		}
		return versionsRead{v, err}
	})
	for i, conn := range conns {
		v, err := read[i].v, read[i].err
		if err != nil {
			unread[conn.Node] = firstLine(err)
			continue
		}
		live[conn.Node] = NodeVersions{ControlPlane: v.ControlPlane(), Kubelet: v.Kubelet, KubeletStamp: v.KubeletStamp,
			Containerd: v.Containerd, ContainerdStamp: v.ContainerdStamp, Joined: v.Joined, CgroupV1: v.CgroupV1, KubeletAllowsCgroupV1: v.KubeletAllowsCgroupV1}
	}
	for _, conn := range in.ControlPlanes {
		if v := live[conn.Node]; !v.Joined {
			continue
		}
		cv, err, failed := readOnce(ctx, conn, func(c ssh.Executor) (string, error) {
			out, err := queryAPI(ctx, c, scripts.Render("upgrade/cluster-config", clusterArgs{Kubectl: kubectl}))
			return nodefacts.ClusterConfigVersion(out), err
		})
		if !failed && err == nil {
			return live, unread, cv, nil
		}
	}
	if anyJoined(live) {
		return live, unread, "", fmt.Errorf("kubeadm-config cannot be read through any control-plane node: is the API up? (homelab doctor says what is wrong)")
	}
	return live, unread, "", nil // no cluster yet
}

// known is what a read need not run again: each tool's version with the
// stamp of the file it was read from.
func (v NodeVersions) known() []nodeprobes.KnownVersion {
	var k []nodeprobes.KnownVersion
	for _, t := range []nodeprobes.KnownVersion{{Tool: "kubelet", Stamp: v.KubeletStamp, Version: v.Kubelet}, {Tool: "containerd", Stamp: v.ContainerdStamp, Version: v.Containerd}} {
		if t.Stamp != "" && t.Version != "" {
			k = append(k, t)
		}
	}
	return k
}

func firstLine(err error) string {
	if err == nil {
		return "unknown"
	}
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// look is the preview of a KubernetesUpgrade new to the stack: a
// read-only look at the nodes (on a first build, none is a member yet).
func look(ctx context.Context, in KubernetesUpgradeArgs) {
	live, unread, cv, err := survey(ctx, in, nil)
	if err != nil {
		p.GetLogger(ctx).Warningf("the upgrade to %s cannot be planned yet: %v", in.Target, err)
		return
	}
	if plan, err := planOf(ctx, in, live, unread, cv); err != nil || !plan.Empty() {
		say(ctx, in, live, unread, cv)
	}
}

func (KubernetesUpgrade) Create(ctx context.Context, req infer.CreateRequest[KubernetesUpgradeArgs]) (infer.CreateResponse[KubernetesUpgradeState], error) {
	st := KubernetesUpgradeState{KubernetesUpgradeArgs: req.Inputs}
	if req.DryRun {
		look(ctx, req.Inputs)
		return infer.CreateResponse[KubernetesUpgradeState]{ID: "kubernetes", Output: st}, nil
	}
	st, err := runUpgrade(ctx, req.Inputs)
	return infer.CreateResponse[KubernetesUpgradeState]{ID: "kubernetes", Output: st}, err
}

func (KubernetesUpgrade) Update(ctx context.Context, req infer.UpdateRequest[KubernetesUpgradeArgs, KubernetesUpgradeState]) (infer.UpdateResponse[KubernetesUpgradeState], error) {
	if req.DryRun {
		st := req.State
		st.KubernetesUpgradeArgs = req.Inputs
		return infer.UpdateResponse[KubernetesUpgradeState]{Output: st}, nil
	}
	st, err := runUpgrade(ctx, req.Inputs)
	if err != nil {
		// The state keeps what the last success reached, so the next up
		// tries again and resumes from what the nodes run.
		st.Reached = req.State.Reached
	}
	return infer.UpdateResponse[KubernetesUpgradeState]{Output: st}, err
}

func (KubernetesUpgrade) Read(ctx context.Context, req infer.ReadRequest[KubernetesUpgradeArgs, KubernetesUpgradeState]) (infer.ReadResponse[KubernetesUpgradeArgs, KubernetesUpgradeState], error) {
	st := req.State
	in := req.Inputs
	if len(in.ControlPlanes) == 0 {
		in = st.KubernetesUpgradeArgs
	}
	live, _, cv, err := survey(reading(ctx), in, st.Live)
	// Nothing read (every node off, or refusing the state's key) is no
	// news: an empty kubeadm-config version would plan an apply of the
	// version the cluster already runs.
	if err == nil && len(live) > 0 {
		// Unread nodes keep their last versions.
		for n, v := range live {
			if st.Live == nil {
				st.Live = map[string]NodeVersions{}
			}
			st.Live[n] = v
		}
		st.ClusterVersion = cv
	}
	return infer.ReadResponse[KubernetesUpgradeArgs, KubernetesUpgradeState]{ID: req.ID, Inputs: req.Inputs, State: st}, nil
}

// Delete changes nothing: the version is the nodes'.
func (KubernetesUpgrade) Delete(ctx context.Context, req infer.DeleteRequest[KubernetesUpgradeState]) (infer.DeleteResponse, error) {
	return infer.DeleteResponse{}, nil
}

// runUpgrade reads the nodes, plans, checks the cluster is fit to start,
// and runs the plan's steps in order, each checked before the next.
func runUpgrade(ctx context.Context, in KubernetesUpgradeArgs) (KubernetesUpgradeState, error) {
	st := KubernetesUpgradeState{KubernetesUpgradeArgs: in}
	log := p.GetLogger(ctx)
	settleEarlier(ctx, in)
	live, unread, cv, err := survey(ctx, in, nil)
	st.Live, st.ClusterVersion = live, cv
	if err != nil {
		// kubeadm-config matters only to an upgrade that is due: with
		// every member at the target there is none (an API down for
		// another reason is the revival's, later in this up).
		if plan, perr := planOf(ctx, in, live, unread, in.Target); perr == nil && plan.Empty() {
			st.Reached = in.Target
			return st, nil
		}
		return st, err
	}
	plan, err := planOf(ctx, in, live, unread, cv)
	if err != nil {
		return st, fmt.Errorf("refusing to upgrade to %s; nothing was changed: %w", in.Target, err)
	}
	if plan.Empty() {
		st.Reached = in.Target
		return st, nil
	}
	if in.Repository == nil {
		return st, fmt.Errorf("cluster.kubernetesVersion %s: the nodes run %s. up upgrades Kubernetes only on nodes whose packages it manages, so that each kubelet moves after its control plane: set cluster.packages.manage: true (docs/provisioning.md, \"Upgrades\"); nothing was changed", in.Target, plan.From)
	}
	u := &upgrader{in: in, plan: plan, conns: map[string]Connection{}}
	for _, c := range in.conns() {
		u.conns[c.Node] = c
	}
	log.Infof("upgrading Kubernetes %s -> %s:\n%s", plan.From, plan.To, strings.Join(plan.Lines(), "\n"))
	if err := u.preflight(ctx); err != nil {
		return st, fmt.Errorf("refusing to upgrade to %s; nothing was changed: %w", in.Target, err)
	}
	for i, s := range plan.Steps {
		log.Infof("upgrade step %d/%d: %s: %s", i+1, len(plan.Steps), strings.Join(s.Nodes, ", "), s.Action)
		began := time.Now()
		if err := u.step(ctx, s); err != nil {
			return st, fmt.Errorf("upgrade step %d/%d (%s, %s) stopped: %w. The steps before it are done; the next up resumes from what the nodes run", i+1, len(plan.Steps), strings.Join(s.Nodes, ", "), s.Action, err)
		}
		log.Infof("upgrade step %d/%d done in %s", i+1, len(plan.Steps), time.Since(began).Round(time.Second))
		for _, n := range s.Nodes {
			v := st.Live[n]
			if s.Action == upgradeplan.Apply || s.Action == upgradeplan.ControlPlane {
				v.ControlPlane = in.Target
			} else {
				v.Kubelet = in.Target
			}
			st.Live[n] = v
		}
	}
	st.ClusterVersion, st.Reached = in.Target, in.Target
	log.Infof("the cluster runs %s", in.Target)
	return st, nil
}

// upgradeRun is the detached kubeadm upgrade run on a node.
const upgradeRun = "kubeadm-upgrade"

// settleEarlier waits for what an earlier up cut off (killed, its
// connection dropped) left running on the nodes, kubeadm's upgrade and
// apt, before anything is read: a node half-way through `kubeadm upgrade
// apply` would read as unhealthy, and its outcome decides what is due.
func settleEarlier(ctx context.Context, in KubernetesUpgradeArgs) {
	eachNode(in.conns(), func(conn Connection) any {
		c, err := dial(ctx, conn)
		if err != nil {
			return nil // the survey says why
		}
		defer c.Close()
		for name, what := range map[string]string{upgradeRun: "kubeadm's upgrade", aptRun: "apt install"} {
			if _, err := settleDetached(ctx, c, conn.Node, name, what); err != nil {
				p.GetLogger(ctx).Warningf("%s: the earlier %s: %v; what the node runs decides what is due now", conn.Node, what, err)
			}
		}
		return nil
	})
}

// upgrader runs one plan.
type upgrader struct {
	in    KubernetesUpgradeArgs
	plan  upgradeplan.Plan
	conns map[string]Connection
}

func (u *upgrader) controlPlane(node string) bool {
	for _, c := range u.in.ControlPlanes {
		if c.Node == node {
			return true
		}
	}
	return false
}

// caughtUp is how far behind the most advanced member another may be
// (raft entries applied) and still count as caught up.
const caughtUp = 1000

// preflight checks, before anything changes, that every control-plane
// node taking part serves the API and has a healthy etcd member caught up
// with the others, then keeps an etcd snapshot on the node that applies.
func (u *upgrader) preflight(ctx context.Context) error {
	var errs *multierror.Error
	applied := map[string]uint64{}
	var most uint64
	for _, c := range u.in.ControlPlanes {
		if !u.takesPart(c.Node) {
			continue
		}
		err := u.on(ctx, c.Node, func(ex ssh.Executor) error {
			// A check, not a wait: a node unhealthy now is named at once.
			pr := configOf(ctx).probes
			pr.timeout = 20 * time.Second
			if err := u.healthy(withProbes(ctx, pr), ex, c.Node, false); err != nil {
				return err
			}
			cli, err := etcdThrough(ctx, ex)
			if err != nil {
				return fmt.Errorf("etcd: %w", err)
			}
			defer cli.Close()
			s, err := cli.Status(ctx, "https://127.0.0.1:2379")
			if err != nil {
				return fmt.Errorf("etcd: %w", err)
			}
			applied[c.Node] = s.RaftAppliedIndex
			most = max(most, s.RaftAppliedIndex)
			return nil
		})
		if err != nil {
			errs = multierror.Append(errs, err)
		}
	}
	for n, a := range applied {
		if most-a > caughtUp {
			errs = multierror.Append(errs, fmt.Errorf("%s: its etcd member has applied %d raft entries fewer than the most advanced member: it is catching up; up again in a minute", n, most-a))
		}
	}
	if err := errs.ErrorOrNil(); err != nil {
		return err
	}
	if first := u.plan.Steps[0]; first.Action == upgradeplan.Apply {
		return u.on(ctx, first.Nodes[0], func(ex ssh.Executor) error { return u.snapshot(ctx, ex, first.Nodes[0]) })
	}
	return nil
}

// takesPart: the node is a member and not left out.
func (u *upgrader) takesPart(node string) bool {
	for _, n := range u.plan.Excluded {
		if n == node {
			return false
		}
	}
	return true
}

func (u *upgrader) on(ctx context.Context, node string, f func(ssh.Executor) error) error {
	ex, err := dial(ctx, u.conns[node])
	if err != nil {
		return err
	}
	defer ex.Close()
	if err := f(ex); err != nil {
		return fmt.Errorf("%s: %w", node, err)
	}
	return nil
}

// snapshot saves etcd's data, checked, on the node before the apply
// touches it: the way back should the upgrade go wrong (docs/etcd.md).
func (u *upgrader) snapshot(ctx context.Context, ex ssh.Executor, node string) error {
	cli, err := etcdThrough(ctx, ex)
	if err != nil {
		return fmt.Errorf("etcd snapshot: %w", err)
	}
	defer cli.Close()
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("etcd snapshot: %w", err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("etcd snapshot: %w", err)
	}
	tmp := filepath.Join(os.TempDir(), fmt.Sprintf("homelab-upgrade-%d.db", time.Now().UnixNano()))
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	defer os.Remove(tmp)
	if _, err := etcdbackup.Check(tmp, false); err != nil {
		return fmt.Errorf("the etcd snapshot taken before the upgrade does not check: %w", err)
	}
	path := fmt.Sprintf("%s/before-upgrade-%s-%s.db", etcdsnapshot.Dir, u.in.Target, time.Now().UTC().Format(etcdsnapshot.TimeFormat))
	if _, err := must(ctx, ex, node, "making "+etcdsnapshot.Dir, scripts.Render("upgrade/snapshot-dir", struct{ Dir string }{etcdsnapshot.Dir})); err != nil {
		return err
	}
	if err := ex.Upload(ctx, path, data, 0o600); err != nil {
		return fmt.Errorf("keeping the etcd snapshot: %w", err)
	}
	p.GetLogger(ctx).Infof("%s: etcd snapshot before the upgrade kept at %s (%d bytes); `homelab etcd restore --from` takes it back", node, path, len(data))
	out, err := must(ctx, ex, node, "pruning the snapshots of earlier upgrades", pruneUpgradeSnapshots(etcdsnapshot.Dir, keptUpgradeSnapshots))
	if err != nil {
		return err
	}
	if gone := strings.Fields(out); len(gone) > 0 {
		p.GetLogger(ctx).Infof("%s: removed the snapshots of older upgrades (the newest %d are kept): %s", node, keptUpgradeSnapshots, strings.Join(gone, ", "))
	}
	return nil
}

// keptUpgradeSnapshots is how many pre-upgrade snapshots a node keeps.
// Each holds the whole keyspace, and one is taken per upgrade: without a
// limit they filled the disk etcd itself lives on, one minor at a time.
// The newest is the way back from the last upgrade; two more cover one
// that went wrong and was retried.
const keptUpgradeSnapshots = 3

// pruneUpgradeSnapshots removes all but the newest keep pre-upgrade
// snapshots in dir (by modification time: the target version leads the
// name), printing the names removed. The scheduled snapshots, named
// otherwise, have their own retention.
func pruneUpgradeSnapshots(dir string, keep int) scripts.Script {
	return scripts.Render("upgrade/prune-snapshots", struct {
		Dir  string
		From int
	}{dir, keep + 1})
}

// install puts the packages at the target's version, held, from the
// target minor's repository.
func (u *upgrader) install(ctx context.Context, ex ssh.Executor, node string, names ...string) error {
	in := PackageArgs{Names: names, Version: strings.TrimPrefix(u.in.Target, "v"), AnyRevision: true, Repository: u.in.Repository}
	if err := uploadRepository(ctx, ex, node, in.Repository); err != nil {
		return err
	}
	_, err := runDetached(ctx, ex, node, aptRun, "installing "+strings.Join(names, ", ")+" "+in.Version, installScript(in))
	return err
}

func (u *upgrader) kubeadm(ctx context.Context, ex ssh.Executor, node, what string, cmd scripts.Script) error {
	out, err := runDetached(ctx, ex, node, upgradeRun, what, cmd)
	if err != nil {
		return err
	}
	p.GetLogger(ctx).Debugf("%s: %s:\n%s", node, what, tail(out, 20))
	return nil
}

// script renders the kubeadm upgrade script name (upgrade/plan, apply,
// node) for the target, with the checks u ignores; controlPlane is
// whether the node has a control plane (upgrade/node).
func (u *upgrader) script(name string, controlPlane bool) scripts.Script {
	return scripts.Render(name, struct {
		Target, IgnorePreflight string
		ControlPlane            bool
	}{u.in.Target, strings.Join(u.ignore(), ","), controlPlane})
}

func (u *upgrader) ignore() []string {
	ignore := append([]string{}, u.in.IgnorePreflight...)
	if len(u.plan.Excluded) > 0 {
		// Left out on purpose: kubeadm would refuse a NotReady one.
		ignore = append(ignore, "ControlPlaneNodesReady")
	}
	return ignore
}

func (u *upgrader) step(ctx context.Context, s upgradeplan.Step) error {
	switch s.Action {
	case upgradeplan.Apply, upgradeplan.ControlPlane:
		node := s.Nodes[0]
		// The whole step, not only the hand-over: kubeadm restarts the
		// node's apiserver and the health check reads through the endpoint.
		return holdingEndpoint(ctx, func() error { return u.controlPlaneStep(ctx, s, node) })
	case upgradeplan.Kubelet:
		return u.kubelet(ctx, s.Nodes[0], false)
	default:
		batch := make([]Connection, len(s.Nodes))
		for i, n := range s.Nodes {
			batch[i] = u.conns[n]
		}
		var errs *multierror.Error
		for _, err := range eachNode(batch, func(c Connection) error { return u.kubelet(ctx, c.Node, true) }) {
			errs = multierror.Append(errs, err)
		}
		return errs.ErrorOrNil()
	}
}

// controlPlaneStep upgrades one control-plane node: kubeadm upgrade
// apply on the first, upgrade node on the others.
func (u *upgrader) controlPlaneStep(ctx context.Context, s upgradeplan.Step, node string) error {
	return u.on(ctx, node, func(ex ssh.Executor) error {
		if err := u.install(ctx, ex, node, "kubeadm"); err != nil {
			return err
		}
		what, cmd := "kubeadm upgrade node", u.script("upgrade/node", true)
		if s.Action == upgradeplan.Apply {
			// kubeadm's own check of what it is about to do, read-only.
			if _, err := must(ctx, ex, node, "kubeadm upgrade plan "+u.in.Target, u.script("upgrade/plan", true)); err != nil {
				return err
			}
			what, cmd = "kubeadm upgrade apply "+u.in.Target, u.script("upgrade/apply", true)
		}
		// kubeadm restarts the node's apiserver: where the node holds
		// the VIP, keepalived hands it over first (its drop-in takes
		// the address off as it stops), or the endpoint would answer
		// nothing until the health check moved it, seconds later.
		return withVIPHandedOver(ctx, ex, node, u.in.Endpoint, u.conns[node].Host, "its control plane is upgraded", func() error {
			if err := u.kubeadm(ctx, ex, node, what, cmd); err != nil {
				return err
			}
			return u.healthy(ctx, ex, node, true)
		})
	})
}

// healthy checks a control-plane node: its apiserver answers /version at
// the target (when upgraded) and /readyz, on the node and through the
// endpoint, its etcd member has a leader, its controller-manager and
// scheduler answer.
func (u *upgrader) healthy(ctx context.Context, ex ssh.Executor, node string, upgraded bool) error {
	a := ControlPlaneAddressArgs{Connection: u.conns[node], Address: u.conns[node].Host, Port: u.in.Port, Endpoint: u.in.Endpoint}
	if upgraded {
		server := "https://" + strings.TrimSuffix(a.Address, ".") + ":" + fmt.Sprint(a.port())
		deadline := time.Now().Add(configOf(ctx).probes.timeout)
		for {
			out, err := queryAPI(ctx, ex, scripts.Render("upgrade/version-at", struct{ Kubectl, Server string }{kubectl, server}))
			if err == nil && strings.Contains(strings.ReplaceAll(out, " ", ""), `"gitVersion":"`+u.in.Target+`"`) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("its apiserver does not answer /version with %s after the upgrade: %v %s", u.in.Target, err, strings.TrimSpace(out))
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(configOf(ctx).probes.poll):
			}
		}
	}
	return waitHealthy(ctx, ex, a, settle{components: []string{nodefacts.KubeControllerManager, nodefacts.KubeScheduler}, endpoint: u.in.Endpoint != ""})
}

// kubelet moves a node's kubelet: drained, (a worker's `kubeadm upgrade
// node`,) kubelet and kubectl at the target, the kubelet restarted, the
// Node Ready at the target, uncordoned.
func (u *upgrader) kubelet(ctx context.Context, node string, worker bool) error {
	api, via, err := clusterClient(ctx, u.in.ControlPlanes[0], u.in.ControlPlanes[1:])
	if err != nil {
		return err
	}
	defer api.Close()
	if err := u.drain(ctx, api, via, node); err != nil {
		return err
	}
	err = u.on(ctx, node, func(ex ssh.Executor) error {
		if worker {
			if err := u.install(ctx, ex, node, "kubeadm"); err != nil {
				return err
			}
			if err := u.kubeadm(ctx, ex, node, "kubeadm upgrade node", u.script("upgrade/node", false)); err != nil {
				return err
			}
		}
		if err := u.install(ctx, ex, node, "kubelet", "kubectl"); err != nil {
			return err
		}
		_, err := must(ctx, ex, node, "restarting the kubelet", scripts.Render("upgrade/restart-kubelet", nil))
		return err
	})
	if err != nil {
		return fmt.Errorf("%w (%s stays cordoned)", err, node)
	}
	if err := u.readyAt(ctx, api, node); err != nil {
		return fmt.Errorf("%s: %w (it stays cordoned)", node, err)
	}
	return uncordon(ctx, api, via, node)
}

// uncordon goes through the endpoint, whose holder's API server may be
// restarting right then: a kubelet of the next minor restarts its static
// pods (their hash changes), and on the VIP holder that refuses every call
// until keepalived moves the VIP. An uncordon is idempotent.
func uncordon(ctx context.Context, api ssh.Executor, via, node string) error {
	r, err := outliveBlips(ctx, func() (ssh.Result, error) {
		return api.Run(ctx, scripts.Render("upgrade/uncordon", clusterArgs{Kubectl: kubectl, Node: node}).String())
	})
	if err != nil {
		return fmt.Errorf("%s: uncordoning %s: %w", via, node, err)
	}
	if r.ExitCode != 0 {
		return fmt.Errorf("%s: uncordoning %s failed (exit %d):\n%s", via, node, r.ExitCode, tail(redact(string(r.Stdout)+string(r.Stderr)), 40))
	}
	return nil
}

// drain evicts the node's pods within the drain timeout, honouring
// PodDisruptionBudgets; past it, it stops and names the pods left.
func (u *upgrader) drain(ctx context.Context, api ssh.Executor, via, node string) error {
	timeout := u.in.DrainTimeout
	// A drain is idempotent too, and may follow a kubelet upgrade that
	// restarted the endpoint's API server (kubelet above).
	r, err := outliveBlips(ctx, func() (ssh.Result, error) {
		return api.Run(ctx, scripts.Render("upgrade/drain", struct{ Kubectl, Node, Timeout string }{kubectl, node, timeout}).String())
	})
	if err != nil {
		return fmt.Errorf("%s: draining %s: %w", via, node, err)
	}
	if r.ExitCode == 0 {
		return nil
	}
	left, _, _ := query(ctx, api, scripts.Render("upgrade/pods-left", clusterArgs{Kubectl: kubectl, Node: node}))

	var pods []string
	for _, pod := range strings.Fields(left) {
		if !strings.HasPrefix(pod, "kube-system/etcd-") && !strings.HasPrefix(pod, "kube-system/kube-") {
			pods = append(pods, pod)
		}
	}
	why := strings.TrimSpace(tail(redact(string(r.Stdout)+string(r.Stderr)), 3))
	return fmt.Errorf("%s: the drain did not finish within cluster.upgrade.drainTimeout %s, so it was not upgraded: still on it: %s (kubectl: %s). It stays cordoned: let those pods go (a PodDisruptionBudget that allows no disruption holds them, usually), or raise the timeout, then up again resumes here",
		node, timeout, strings.Join(pods, ", "), why)
}

// readyAt waits for the Node to be Ready with its kubelet at the target.
func (u *upgrader) readyAt(ctx context.Context, api ssh.Executor, node string) error {
	deadline := time.Now().Add(configOf(ctx).probes.timeout)
	for {
		out, _, err := query(ctx, api, scripts.Render("upgrade/node-ready", clusterArgs{Kubectl: kubectl, Node: node}))
		if err == nil && strings.TrimSpace(out) == u.in.Target+" True" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("its Node is not Ready at %s after the kubelet's upgrade (kubelet version, Ready: %q)", u.in.Target, strings.TrimSpace(out))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(configOf(ctx).probes.poll):
		}
	}
}
