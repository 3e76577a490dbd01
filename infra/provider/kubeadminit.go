package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/nodeprobes"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/nodefacts"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
)

// KubeadmInit bootstraps the cluster: kubeadm init on one control-plane
// node, once, where no cluster exists yet. It is one resource for the
// whole cluster, not a property of a node: which node is listed first is
// no identity, and a cluster found running on any control-plane node is
// the cluster (a replaced or blank bootstrap node re-joins it through its
// own KubeadmJoin; no second init ever runs).
type KubeadmInit struct{}

type KubeadmInitArgs struct {
	// Connection is the node a new cluster is bootstrapped on.
	Connection Connection `pulumi:"connection"`
	ConfigPath string     `pulumi:"configPath"`
	// ConfigSha is the checksum of the cluster-wide configuration: a
	// change is an update (uploaded to kubeadm-config), never a second
	// init, and another bootstrap node is no change at all.
	ConfigSha       string   `pulumi:"configSha"`
	IgnorePreflight []string `pulumi:"ignorePreflight,optional"`
	// Peers are the other control-plane nodes, where a cluster may
	// already run; one that cannot be checked stops a new init.
	Peers []Connection `pulumi:"peers,optional"`
	// JoinConfigPath and BootstrapToken are no longer used; stacks made
	// by earlier versions hold them.
	JoinConfigPath string `pulumi:"joinConfigPath,optional"`
	BootstrapToken string `pulumi:"bootstrapToken,optional" provider:"secret"`
}

type KubeadmInitState struct {
	KubeadmInitArgs
	Initialized bool `pulumi:"initialized"`
	// BootstrappedOn is the node kubeadm init ran on, as recorded then.
	BootstrappedOn string `pulumi:"bootstrappedOn,optional"`
	// AdminKubeconfig is /etc/kubernetes/admin.conf: cluster-admin access.
	AdminKubeconfig string `pulumi:"adminKubeconfig" provider:"secret"`
	// ClusterUID identifies the cluster (its kube-system namespace's UID):
	// it changes only when kubeadm init made a new one, and what lives in
	// the cluster (the pod network) follows it.
	ClusterUID string `pulumi:"clusterUID,optional"`
	// ResetRisk says, when the cluster is not found and the bootstrap
	// node holds etcd data a reset would take, what the bootstrap would
	// reset ("" for nothing): preview shows it as destructive.
	// PartialRepair says what it would repair instead.
	ResetRisk     string `pulumi:"resetRisk,optional"`
	PartialRepair string `pulumi:"partialRepair,optional"`
}

// WireDependencies keeps the cluster's identity known in a preview: an
// updated config (an upload, never a second init) keeps the cluster, and
// what follows it (the pod network) must not show as changing. Update's dry
// run says when it may change (a bootstrap where none was recorded).
func (k *KubeadmInit) WireDependencies(f infer.FieldSelector, args *KubeadmInitArgs, state *KubeadmInitState) {
	f.OutputField(&state.ClusterUID).AlwaysKnown()
}

func (k *KubeadmInit) Annotate(a infer.Annotator) {
	a.Describe(&k, "The cluster's bootstrap: kubeadm init on one control-plane node where no cluster runs yet; reads back whether the cluster exists.")
	a.SetToken("index", "KubeadmInit")
}

// initState is whether the node ran init to completion
// (nodefacts/state's answers).
func initState() scripts.Script {
	files := nodefacts.CompletionFiles(true, true)
	return nodeprobes.State(files[:1], files[1:]...)
}

func initScript(in KubeadmInitArgs) scripts.Script {
	return scripts.Render("kubeadm/init", kubeadmRunArgs{Config: in.ConfigPath, Marker: nodefacts.InitMarker, IgnorePreflight: strings.Join(in.IgnorePreflight, ",")})
}

func (KubeadmInit) Create(ctx context.Context, req infer.CreateRequest[KubeadmInitArgs]) (infer.CreateResponse[KubeadmInitState], error) {
	in := req.Inputs
	st := KubeadmInitState{KubeadmInitArgs: in, Initialized: true}
	if req.DryRun {
		return infer.CreateResponse[KubeadmInitState]{ID: "cluster", Output: st}, nil
	}
	err := bootstrap(ctx, in, &st)
	return infer.CreateResponse[KubeadmInitState]{ID: "cluster", Output: st}, err
}

// bootstrap makes the cluster exist: adopted where it already runs (the
// bootstrap node, or a peer), else initialised on the bootstrap node.
func bootstrap(ctx context.Context, in KubeadmInitArgs, st *KubeadmInitState) error {
	c, err := dial(ctx, in.Connection)
	if err != nil {
		return err
	}
	defer c.Close()
	node := in.Connection.Node
	// An init an earlier up started and did not see end runs on: its
	// outcome decides, never a reset under it.
	if _, err := settleBeforeReset(ctx, c, node, initRun, "kubeadm init"); err != nil {
		return err
	}
	state, _, err := query(ctx, c, initState())
	if err != nil {
		return err
	}
	where, at := c, node
	switch strings.TrimSpace(state) {
	case nodefacts.StateSetUp:
		// A cluster built before this state (adopted, or state lost): the
		// stored cluster config becomes ours, which later joins and
		// kubeadm upgrades read.
		p.GetLogger(ctx).Infof("%s: control plane already initialised; adopting it", node)
		if err := uploadConfig(ctx, c, node, in.ConfigPath); err != nil {
			return err
		}
	default:
		peer, err := livePeer(ctx, in.Peers)
		if err != nil {
			return fmt.Errorf("%s: %w", node, err)
		}
		if peer != nil {
			// The cluster outlived the node it was bootstrapped on, or
			// another node is listed first now: it is this cluster.
			pc, err := dial(ctx, *peer)
			if err != nil {
				return err
			}
			defer pc.Close()
			p.GetLogger(ctx).Infof("the cluster runs on %s; %s joins it as a member", peer.Node, node)
			if err := uploadConfig(ctx, pc, peer.Node, in.ConfigPath); err != nil {
				return err
			}
			where, at = pc, peer.Node
			break
		}
		if strings.TrimSpace(state) == nodefacts.StatePartial {
			// No other node serves the cluster: whatever etcd data is
			// here is its only copy.
			f, err := readPartial(ctx, c)
			if err != nil {
				return err
			}
			if f.etcdData && f.marked {
				if err := repairBootstrap(ctx, c, node, in.ConfigPath); err != nil {
					return err
				}
				break
			}
			if f.etcdData && !consented(ctx, node) {
				return onlyCopyRefusal(node, "resetting the interrupted init",
					"no other control-plane node serves the cluster, and no completion marker says the node was set up: an init that never finished, or a cluster built without homelab, which homelab adopt takes over")
			}
			p.GetLogger(ctx).Warningf("%s: an earlier kubeadm init was interrupted; resetting it (CAs kept, etcd data moved aside)", node)
			out, err := mustFinish(ctx, c, node, "resetting the interrupted init", resetKeepingCAs())
			reportAside(ctx, node, out)
			if err != nil {
				return err
			}
		}
		if _, err := runDetached(ctx, c, node, initRun, "kubeadm init", initScript(in)); err != nil {
			return err
		}
		if err := deleteInitTokens(context.WithoutCancel(ctx), c, node); err != nil {
			return err
		}
		// A new cluster: whatever identity the state held is gone, even
		// if the new one cannot be read yet.
		st.BootstrappedOn, st.ClusterUID = node, ""
	}
	// kubeadm has run to completion whatever the user pressed meanwhile;
	// its result must reach the state too.
	kc, err := where.Read(context.WithoutCancel(ctx), adminConf)
	if err != nil {
		return fmt.Errorf("%s: reading %s: %w", at, adminConf, err)
	}
	st.AdminKubeconfig, st.Initialized = string(kc), true
	// Read through the node that serves the cluster: the bootstrap node,
	// or the peer it was adopted from.
	if uid := readClusterUID(context.WithoutCancel(ctx), where); uid != "" {
		st.ClusterUID = uid
	}
	return nil
}

// uploadConfigArgs are kubeadm/upload-config's values.
type uploadConfigArgs struct{ Config string }

func uploadConfig(ctx context.Context, c ssh.Executor, node, configPath string) error {
	_, err := must(ctx, c, node, "uploading the kubeadm config", scripts.Render("kubeadm/upload-config", uploadConfigArgs{Config: configPath}))
	return err
}

func (KubeadmInit) Read(ctx context.Context, req infer.ReadRequest[KubeadmInitArgs, KubeadmInitState]) (infer.ReadResponse[KubeadmInitArgs, KubeadmInitState], error) {
	ctx = reading(ctx)
	st := req.State
	in := req.Inputs
	if in.Connection.Host == "" {
		in = st.KubeadmInitArgs
	}
	live, known := clusterExists(ctx, in)
	if known {
		st.Initialized = live.adminKubeconfig != ""
	}
	st.ResetRisk, st.PartialRepair = "", ""
	if !st.Initialized {
		st.ResetRisk, st.PartialRepair = bootstrapPlan(ctx, in.Connection)
	}
	if live.adminKubeconfig != "" {
		st.AdminKubeconfig = live.adminKubeconfig
	}
	if live.clusterUID != "" {
		st.ClusterUID = live.clusterUID
	} else if live.adminKubeconfig != "" && st.ClusterUID != "" {
		p.GetLogger(ctx).Warningf("%s: its API did not tell the cluster's identity (kube-system's UID): the last known one is kept", live.node)
	}
	return infer.ReadResponse[KubeadmInitArgs, KubeadmInitState]{ID: req.ID, Inputs: req.Inputs, State: st}, nil
}

// liveCluster is what clusterExists read where the cluster runs.
type liveCluster struct {
	adminKubeconfig string
	// clusterUID is "" when that node's API did not answer.
	clusterUID string
	// node is where it was read.
	node string
}

// clusterSeen is what one node told of the cluster.
type clusterSeen struct {
	live liveCluster
	// checked: the node was looked at, or may be anything now.
	checked bool
}

// clusterSearch asks each node in turn where the cluster runs. A node that
// does not answer says nothing either way. One that refuses the key may be
// anything by now (every machine rebuilt): counted as looked at, it lets
// Initialized go false when no other node has the cluster, and the init is
// then due, which looks for the cluster on every node before it runs.
var clusterSearch = keepOrRecheck(func(clusterSeen) clusterSeen { return clusterSeen{checked: true} })

// peerData is what a peer answers when it holds etcd data while its API
// does not answer (an expired control plane, or one being repaired).
const peerData = "data"

// peerStateArgs are cluster/peer's values: what it prints for a peer the
// cluster runs on (Live), one holding its data only (Data), and one
// without it (None).
type peerStateArgs struct {
	Kubectl, AdminConf, MemberDir string
	Live, Data, None              string
}

func peerCheck() scripts.Script {
	return scripts.Render("cluster/peer", peerStateArgs{Kubectl: kubectl, AdminConf: adminConf, MemberDir: nodefacts.EtcdMemberDir,
		Live: nodefacts.StateSetUp, Data: peerData, None: nodefacts.StateNone})
}

// clusterExists looks for the cluster on the bootstrap node, then on its
// peers, and returns admin.conf and the cluster's identity from where it
// runs. An admin.conf whose client certificate expired is taken only when
// no node has one that has not. known is false when nothing could be
// checked (every node unreachable), or when a peer holds the cluster's
// data but its API does not answer: that says nothing about the cluster
// being gone, so the last state stands.
func clusterExists(ctx context.Context, in KubeadmInitArgs) (live liveCluster, known bool) {
	var expired liveCluster
	unsure := false
	peer := peerCheck()
	for i, conn := range append([]Connection{in.Connection}, in.Peers...) {
		check := initState()
		if i > 0 {
			check = peer
		}
		// Its read never fails: a node that cannot tell is one without
		// the cluster.
		seen, _ := readNode(ctx, conn, clusterSeen{}, clusterSearch, func(c ssh.Executor) (clusterSeen, error) {
			seen := clusterSeen{checked: true}
			out, _, _ := query(ctx, c, check)
			switch strings.TrimSpace(out) {
			case nodefacts.StateSetUp:
				if kc, err := c.Read(ctx, adminConf); err == nil {
					seen.live = liveCluster{adminKubeconfig: string(kc), clusterUID: readClusterUID(ctx, c), node: conn.Node}
				}
			case peerData:
				seen.checked, unsure = false, true
				p.GetLogger(ctx).Warningf("%s holds etcd data but its API does not answer: whether the cluster exists is kept as last known", conn.Node)
			}
			return seen, nil
		})
		known = known || seen.checked
		if kc := seen.live.adminKubeconfig; kc != "" {
			if !adminExpired(kc, time.Now()) {
				return seen.live, true
			}
			if expired.adminKubeconfig == "" {
				expired = seen.live
			}
		}
	}
	if expired.adminKubeconfig != "" {
		return expired, true
	}
	return liveCluster{}, known && !unsure
}

// adminExpired reports whether a kubeconfig's client certificate expired
// by now (false when it carries none it can tell).
func adminExpired(kubeconfig string, now time.Time) bool {
	cfg, err := clientcmd.Load([]byte(kubeconfig))
	if err != nil {
		return false
	}
	for _, a := range cfg.AuthInfos {
		if c, err := nodefacts.ParseCertPEM(a.ClientCertificateData); err == nil {
			return !c.NotAfter.After(now)
		}
	}
	return false
}

// initChanges: another bootstrap node (a reordered inventory) is no
// change; the cluster's configuration and whether it exists are. Never a
// replacement: a second init would be a second cluster. An admin
// kubeconfig whose client certificate expired (the whole control plane
// expired, and is revived before this step) is read again.
func initChanges(in KubeadmInitArgs, st KubeadmInitState, now time.Time) changeSet {
	d := changeSet{}
	if in.ConfigSha != st.ConfigSha {
		d.update("configSha")
	}
	if !st.Initialized {
		d.update("initialized")
	} else if adminExpired(st.AdminKubeconfig, now) {
		d.update("adminKubeconfig")
	}
	return d
}

func (KubeadmInit) Diff(ctx context.Context, req infer.DiffRequest[KubeadmInitArgs, KubeadmInitState]) (infer.DiffResponse, error) {
	d := initChanges(req.Inputs, req.State, time.Now())
	if d.has("adminKubeconfig") {
		p.GetLogger(ctx).Infof("the stack's admin kubeconfig has expired: up reads admin.conf again once the control plane's certificates are renewed")
	}
	return d.diff(false), nil
}

func (KubeadmInit) Update(ctx context.Context, req infer.UpdateRequest[KubeadmInitArgs, KubeadmInitState]) (infer.UpdateResponse[KubeadmInitState], error) {
	in, old := req.Inputs, req.State
	st := KubeadmInitState{KubeadmInitArgs: in, Initialized: true, AdminKubeconfig: old.AdminKubeconfig, BootstrappedOn: old.BootstrappedOn, ClusterUID: old.ClusterUID}
	if req.DryRun {
		if !old.Initialized {
			// Perhaps a new cluster (every machine rebuilt), perhaps the
			// same one adopted from a peer: not known before it runs.
			st.ClusterUID = ""
		}
		return infer.UpdateResponse[KubeadmInitState]{Output: st}, nil
	}
	d := initChanges(in, old, time.Now())
	if d.has("initialized") {
		err := bootstrap(ctx, in, &st)
		return infer.UpdateResponse[KubeadmInitState]{Output: st}, err
	}
	if d.has("configSha") {
		if err := uploadAnywhere(ctx, in); err != nil {
			return infer.UpdateResponse[KubeadmInitState]{}, err
		}
	}
	if d.has("adminKubeconfig") {
		// The revival before this step renewed admin.conf where it could.
		live, _ := clusterExists(ctx, in)
		if live.adminKubeconfig != "" {
			st.AdminKubeconfig = live.adminKubeconfig
		}
		if live.clusterUID != "" {
			st.ClusterUID = live.clusterUID
		}
		if adminExpired(st.AdminKubeconfig, time.Now()) {
			p.GetLogger(ctx).Warningf("every control-plane node's admin.conf still has an expired client certificate: the stack's kubeconfig (homelab kubeconfig) stays expired until one is renewed (ControlPlaneAddress renews them later in this up; the next refresh reads it)")
		}
	}
	return infer.UpdateResponse[KubeadmInitState]{Output: st}, nil
}

// uploadAnywhere uploads the cluster configuration through the first
// control-plane node that answers: the cluster keeps its
// ClusterConfiguration in kubeadm-config, which later joins and upgrades
// read.
func uploadAnywhere(ctx context.Context, in KubeadmInitArgs) error {
	for _, conn := range append([]Connection{in.Connection}, in.Peers...) {
		c, err := dial(ctx, conn)
		if err != nil {
			continue
		}
		err = uploadConfig(ctx, c, conn.Node, in.ConfigPath)
		c.Close()
		return err
	}
	return fmt.Errorf("no control-plane node answers to take the new kubeadm config")
}

// Delete changes no node: each node's KubeadmJoin resets it.
func (KubeadmInit) Delete(ctx context.Context, req infer.DeleteRequest[KubeadmInitState]) (infer.DeleteResponse, error) {
	return infer.DeleteResponse{}, nil
}
