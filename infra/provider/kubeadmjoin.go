package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/nodeprobes"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/nodefacts"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
)

func joinScript(in KubeadmJoinArgs) scripts.Script {
	return scripts.Render("kubeadm/join", kubeadmRunArgs{Config: in.ConfigPath, Marker: nodefacts.JoinMarker, IgnorePreflight: strings.Join(in.IgnorePreflight, ",")})
}

// KubeadmJoin is one node's membership of the cluster: `kubeadm join`, as a
// control-plane member or a worker (or, on the node that bootstrapped the
// cluster, the init that already made it a member). Its live state is
// whether the node's kubelet (and, for control-plane nodes, its etcd member
// and static pods) were set up, and what its kubelet authenticates with:
// the credentials the join's TLS bootstrap leaves, which it keeps rotating
// (kubeletclient.go).
type KubeadmJoin struct{}

type KubeadmJoinArgs struct {
	Connection Connection `pulumi:"connection"`
	// ConfigPath is where Config is written for the join's run, and
	// removed after it: it holds the node's token.
	ConfigPath string `pulumi:"configPath"`
	// Config is the node's join configuration; none for the single-ip
	// layout's endpoint node, which cannot join through itself.
	Config          string   `pulumi:"config,optional" provider:"secret"`
	ConfigSha       string   `pulumi:"configSha"`
	ControlPlane    bool     `pulumi:"controlPlane"`
	IgnorePreflight []string `pulumi:"ignorePreflight,optional"`
	// Via is a control-plane node with admin.conf: the node's token is
	// made and removed, and a replaced machine's Node deleted, there.
	Via Connection `pulumi:"via"`
	// BootstrapToken is the node's own join token, created just before its
	// join and deleted right after.
	BootstrapToken string `pulumi:"bootstrapToken" provider:"secret"`
	// Peers are the control-plane nodes: etcd is reached through them,
	// and the API when Via does not answer.
	Peers []Connection `pulumi:"peers,optional"`
}

type KubeadmJoinState struct {
	KubeadmJoinArgs
	Joined bool `pulumi:"joined"`
	// LiveKubeletClient is what the node's kubelet.conf authenticates
	// with, read live: the certificate file it names, or "embedded".
	LiveKubeletClient string `pulumi:"liveKubeletClient,optional"`
	// KubeletClientRepair is what up does about it and why ("" for
	// nothing); KubeletClientProblem why up leaves an embedded
	// certificate as it is.
	KubeletClientRepair  string `pulumi:"kubeletClientRepair,optional"`
	KubeletClientProblem string `pulumi:"kubeletClientProblem,optional"`
	// ResetRisk says what a join would reset on a control-plane node
	// kubeadm left half set up that holds etcd data ("" for nothing):
	// preview shows it as destructive.
	ResetRisk string `pulumi:"resetRisk,optional"`
}

func (k *KubeadmJoin) Annotate(a infer.Annotator) {
	a.Describe(&k, "A node's membership of the cluster (kubeadm join, or the init that made it a member) and its kubelet's client credentials; reads back whether the node is joined and what kubelet.conf authenticates with, and points a kubelet.conf that embeds its certificate at the rotating file.")
	a.SetToken("index", "KubeadmJoin")
}

// memberCheck is nodefacts/state for a member: either marker, then the
// files every member of its kind has.
func (j KubeadmJoinArgs) memberCheck() scripts.Script { return j.memberState().Script() }

func (j KubeadmJoinArgs) memberState() nodeprobes.StateArgs {
	files := nodefacts.CompletionFiles(false, j.ControlPlane)
	return nodeprobes.StateAt("", []string{nodefacts.JoinMarker, nodefacts.InitMarker}, files[1:]...)
}

func (KubeadmJoin) Create(ctx context.Context, req infer.CreateRequest[KubeadmJoinArgs]) (infer.CreateResponse[KubeadmJoinState], error) {
	in := req.Inputs
	st := KubeadmJoinState{KubeadmJoinArgs: in, Joined: true}
	if req.DryRun {
		return infer.CreateResponse[KubeadmJoinState]{ID: in.Connection.Node, Output: st}, nil
	}
	err := joinAndRepair(ctx, in, &st)
	return infer.CreateResponse[KubeadmJoinState]{ID: in.Connection.Node, Output: st}, err
}

// joinAndRepair joins the node, or adopts it when it is a member already,
// then repairs its kubelet credentials where they are embedded (an
// adopted member's may be).
func joinAndRepair(ctx context.Context, in KubeadmJoinArgs, st *KubeadmJoinState) error {
	if err := runJoin(ctx, in); err != nil {
		return err
	}
	plan, err := convergeKubeletClient(ctx, in)
	st.setKubeletClient(plan)
	return err
}

func runJoin(ctx context.Context, in KubeadmJoinArgs) error {
	c, err := dial(ctx, in.Connection)
	if err != nil {
		return err
	}
	defer c.Close()
	node := in.Connection.Node
	// A join an earlier up started and did not see end runs on: its
	// outcome decides, never a reset under it.
	settled, err := settleBeforeReset(ctx, c, node, joinRun, "kubeadm join")
	if err != nil {
		return err
	}
	state, _, err := query(ctx, c, in.memberCheck())
	if err != nil {
		return err
	}
	switch strings.TrimSpace(state) {
	case nodefacts.StateSetUp:
		if settled {
			// The interrupted up's join ended well without it: the node
			// is new to the cluster all the same, and this up's verify
			// must not find it a moment before Ready.
			return awaitSettledJoin(ctx, in)
		}
		p.GetLogger(ctx).Infof("%s: already a member; adopting it", node)
		return nil
	case nodefacts.StatePartial:
		if err := resetPartial(ctx, c, in); err != nil {
			return err
		}
	}
	if in.Config == "" {
		return fmt.Errorf("%s is blank (a replaced machine?) and it is the cluster's only endpoint "+
			"(single-ip layout), so it cannot re-join through itself: restore its disk, or rebuild the cluster (homelab destroy, then up); "+
			"the vip and dns layouts re-join such a node by themselves", node)
	}
	cl, clNode, err := clusterClient(ctx, in.Via, in.Peers)
	if err != nil {
		return fmt.Errorf("%s cannot join: %w", node, err)
	}
	defer cl.Close()
	if err := forgetOldMachine(ctx, cl, clNode, in); err != nil {
		return err
	}
	if err := createToken(ctx, cl, clNode, node, in.BootstrapToken); err != nil {
		return err
	}
	// The token goes once the join is over, whatever happened to it.
	defer func() {
		if err := deleteToken(context.WithoutCancel(ctx), cl, clNode, in.BootstrapToken); err != nil {
			p.GetLogger(ctx).Warningf("%v (it expires within %s anyway)", err, joinTokenTTL)
		}
	}()
	if err := c.Upload(ctx, in.ConfigPath, []byte(in.Config), 0o600); err != nil {
		return fmt.Errorf("%s: writing the join config: %w", node, err)
	}
	if _, err := runDetached(ctx, c, node, joinRun, "kubeadm join", joinScript(in)); err != nil {
		return err
	}
	return awaitJoinedNetwork(ctx, cl, clNode, node)
}

// awaitSettledJoin waits for the pod network of a node whose join an
// earlier up started and this one saw end.
func awaitSettledJoin(ctx context.Context, in KubeadmJoinArgs) error {
	cl, clNode, err := clusterClient(ctx, in.Via, in.Peers)
	if err != nil {
		return fmt.Errorf("%s joined, but no control-plane node answers to wait for its Node: %w", in.Connection.Node, err)
	}
	defer cl.Close()
	return awaitJoinedNetwork(ctx, cl, clNode, in.Connection.Node)
}

// resetPartial undoes what an interrupted kubeadm run left, unless that
// would destroy something live: a healthy etcd member (its removal is
// checked against quorum and needs consent) or a Ready Node's kubelet.
func resetPartial(ctx context.Context, c ssh.Executor, in KubeadmJoinArgs) error {
	node := in.Connection.Node
	cl, clNode, err := clusterClient(ctx, in.Via, in.Peers)
	if err == nil {
		defer cl.Close()
		ready, err := nodeReady(ctx, cl, node)
		if err != nil {
			return fmt.Errorf("%s: %w", clNode, err)
		}
		if ready && !consented(ctx, node) {
			return refused(node, "resetting the node", "reset a node whose Node is Ready though its kubeadm run never finished "+
				"(its completion marker is missing): its pods are evicted and its state deleted. If it is fully set up, `homelab adopt` marks it instead")
		}
	}
	if in.ControlPlane {
		f, err := readPartial(ctx, c)
		if err != nil {
			return err
		}
		// Its data is kept by the live members when it is not theirs (a
		// stale member, a learner's partial copy) or once its member is
		// removed from them; as their only member, it is the only copy.
		if err := removeOwnMember(ctx, in, f.etcdData && !consented(ctx, node)); err != nil {
			return fmt.Errorf("%s: not resetting it: %w", node, err)
		}
	}
	p.GetLogger(ctx).Warningf("%s: an earlier kubeadm run was interrupted; resetting it before the join (CAs kept, etcd data moved aside)", node)
	out, err := mustFinish(ctx, c, node, "resetting the interrupted join", resetKeepingCAs())
	reportAside(ctx, node, out)
	return err
}

// removeOwnMember removes the node's etcd member (by name or peer URL)
// before its etcd data goes, with removeMember's guards: a node whose
// member cannot be removed safely keeps its data. A cluster whose only
// member it is has nothing to remove it from, and its data is the only
// copy: refused when keep says so (the node holds data, no consent).
func removeOwnMember(ctx context.Context, in KubeadmJoinArgs, keep bool) error {
	node := in.Connection.Node
	return withEtcd(ctx, append([]Connection{in.Connection}, in.Peers...), func(cli *clientv3.Client, tunnel ssh.Executor) error {
		ms, err := readMembers(ctx, cli, false)
		if err != nil {
			return err
		}
		m, found, only := ownMember(ms, node, in.Connection.Host)
		switch {
		case !found:
			return nil
		case only && keep:
			return onlyCopyRefusal(node, "resetting the node", "its etcd member is the cluster's only one")
		case only:
			return nil
		}
		return removeMember(ctx, cli, tunnel, m, false)
	})
}

// joinRead: a node refusing the key reads as not joined, so the join
// runs with the current key, and it looks first: a member already set up
// is adopted, a half-done one reset only where that destroys nothing live.
var joinRead = keepOrRecheck(func(st KubeadmJoinState) KubeadmJoinState {
	st.Joined = false
	return st
})

func (KubeadmJoin) Read(ctx context.Context, req infer.ReadRequest[KubeadmJoinArgs, KubeadmJoinState]) (infer.ReadResponse[KubeadmJoinArgs, KubeadmJoinState], error) {
	ctx = reading(ctx)
	last := req.State
	last.Via = currentVia(last.Via, req.Inputs.Via)
	st, err := readNode(ctx, last.Connection, last, joinRead, func(c ssh.Executor) (KubeadmJoinState, error) {
		st := last
		out, _, err := query(ctx, c, st.joinReadScript())
		if err != nil {
			return st, err
		}
		state, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
		st.Joined = strings.TrimSpace(state) == nodefacts.StateSetUp
		st.ResetRisk = ""
		if st.ControlPlane && strings.TrimSpace(state) == nodefacts.StatePartial && strings.Contains(out, "\n"+etcdDataLine) {
			st.ResetRisk = joinResetRisk(st.Connection.Node)
		}
		st.setKubeletClient(planKubeletClient(nodefacts.ParseKubeletClient(out), st.Connection.Node, time.Now(), pairChecks{}))
		return st, nil
	})
	if err != nil {
		return infer.ReadResponse[KubeadmJoinArgs, KubeadmJoinState]{}, err
	}
	return infer.ReadResponse[KubeadmJoinArgs, KubeadmJoinState]{ID: req.ID, Inputs: req.Inputs, State: st}, nil
}

// joinChanges: through which node the cluster is reached (via, peers) is
// a means, not the node's membership, and never a change. Only a node not
// joined costs a join.
func joinChanges(in KubeadmJoinArgs, st KubeadmJoinState) changeSet {
	d := changeSet{}
	if in.ControlPlane != st.ControlPlane {
		d.replace("controlPlane")
	}
	if !st.Joined {
		d.update("joined")
	}
	// A new join config (a label, a taint) matters to a node not yet
	// joined; labels and taints of joined nodes are NodeMeta's job.
	if in.ConfigSha != st.ConfigSha {
		d.update("configSha")
	}
	if in.Connection != st.Connection {
		d.update("connection")
	}
	// kubelet.conf embeds a client certificate up can carry over to the
	// rotating file; one it cannot is left, and Diff says why.
	if st.KubeletClientRepair != "" {
		d.update("liveKubeletClient")
	}
	return d
}

func (KubeadmJoin) Diff(ctx context.Context, req infer.DiffRequest[KubeadmJoinArgs, KubeadmJoinState]) (infer.DiffResponse, error) {
	node, st := req.Inputs.Connection.Node, req.State
	if st.KubeletClientRepair != "" {
		p.GetLogger(ctx).Infof("%s: %s", node, st.KubeletClientRepair)
	}
	if st.KubeletClientProblem != "" {
		p.GetLogger(ctx).Warningf("%s: %s", node, st.KubeletClientProblem)
	}
	return joinChanges(req.Inputs, st).diff(true), nil
}

func (KubeadmJoin) Update(ctx context.Context, req infer.UpdateRequest[KubeadmJoinArgs, KubeadmJoinState]) (infer.UpdateResponse[KubeadmJoinState], error) {
	old := req.State
	st := KubeadmJoinState{KubeadmJoinArgs: req.Inputs, Joined: true,
		LiveKubeletClient: old.LiveKubeletClient, KubeletClientRepair: old.KubeletClientRepair, KubeletClientProblem: old.KubeletClientProblem}
	d := joinChanges(req.Inputs, old)
	switch {
	case req.DryRun:
		if d.has("liveKubeletClient") {
			st.setKubeletClient(kubeletPlan{live: nodefacts.KubeletClientCert})
		}
		return infer.UpdateResponse[KubeadmJoinState]{Output: st}, nil
	case d.has("joined"):
		err := joinAndRepair(ctx, req.Inputs, &st)
		return infer.UpdateResponse[KubeadmJoinState]{Output: st}, err
	case d.has("liveKubeletClient"):
		plan, err := convergeKubeletClient(ctx, req.Inputs)
		st.setKubeletClient(plan)
		return infer.UpdateResponse[KubeadmJoinState]{Output: st}, err
	}
	return infer.UpdateResponse[KubeadmJoinState]{Output: st}, nil
}

// Delete takes the node out of the cluster: drained (workers), its Node
// deleted, its etcd member removed (control-plane nodes; checked against
// quorum first, and a failure stops here, before the reset), then reset.
// A node that runs kubeadm's state is reset only with the user's consent
// for it, and an unreachable one is forgotten only with it.
func (KubeadmJoin) Delete(ctx context.Context, req infer.DeleteRequest[KubeadmJoinState]) (infer.DeleteResponse, error) {
	st := req.State
	node := st.Connection.Node
	c, err := dial(ctx, st.Connection)
	if err != nil {
		if !consented(ctx, node) {
			return infer.DeleteResponse{}, refused(node, "removing the node", fmt.Sprintf(
				"forget a node it cannot reach (%v): its disk would keep %s, and the cluster no longer tracks it. Power it on so it can be reset, or wipe its disk",
				err, leftovers(st.ControlPlane)))
		}
		return infer.DeleteResponse{}, forgetNode(ctx, st, nil)
	}
	defer c.Close()
	out, _, err := query(ctx, c, st.memberCheck())
	if err != nil {
		return infer.DeleteResponse{}, err
	}
	if strings.TrimSpace(out) != nodefacts.StateNone && !consented(ctx, node) {
		what := "kubelet and pods"
		if st.ControlPlane {
			what = "control plane and etcd member"
		}
		return infer.DeleteResponse{}, refused(node, "resetting the node", "reset a node that runs kubeadm's "+what+": its pods are evicted and "+leftovers(st.ControlPlane)+" are deleted")
	}
	// The kubelet stops once drained, before its Node goes: a kubelet
	// still running could register the Node again (the lab's does; a real
	// one's behaviour has changed across versions, kubernetes#71398), and
	// the cluster would keep a node whose machine is reset right after.
	stopKubelet := func() {
		if _, err := c.Run(ctx, scripts.Render("leave/stop-kubelet", nil).String()); err != nil {
			p.GetLogger(ctx).Warningf("%s: stopping the kubelet: %v", node, err)
		}
	}
	if err := forgetNode(ctx, st, stopKubelet); err != nil {
		return infer.DeleteResponse{}, err
	}
	out, err = mustFinish(ctx, c, node, "kubeadm reset", resetNode())
	reportAside(ctx, node, out)
	return infer.DeleteResponse{}, err
}

// forgetNode removes the node from the cluster's records: drained and its
// Node deleted where the API answers, and its etcd member removed.
// drained (may be nil) runs between the drain and the Node's deletion.
func forgetNode(ctx context.Context, st KubeadmJoinState, drained func()) error {
	node := st.Connection.Node
	if cl, clNode, err := clusterClient(ctx, st.Via, st.Peers); err == nil {
		a := clusterArgs{Kubectl: kubectl, Node: node}
		if !st.ControlPlane {
			_, _ = cl.Run(ctx, scripts.Render("leave/drain", a).String())
		}
		if drained != nil {
			drained()
		}
		if _, err := mustAPI(ctx, cl, clNode, "deleting Node "+node, scripts.Render("kubectl/delete-node", a)); err != nil {
			p.GetLogger(ctx).Warning(err.Error())
		}
		cl.Close()
	}
	if !st.ControlPlane {
		return nil
	}
	return removeOwnMember(ctx, st.KubeadmJoinArgs, false)
}
