package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
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

// clusterArgs are the values of the scripts that ask the API through a
// control-plane node's admin.conf (cluster/, leave/): Node, where the
// script is about one.
type clusterArgs struct {
	Kubectl string
	Node    string
}

// readClusterUID is the cluster's identity, read through a node whose
// admin.conf the API answers to; "" when the API does not say.
func readClusterUID(ctx context.Context, c ssh.Executor) string {
	out, code, err := query(ctx, c, scripts.Render("cluster/uid", clusterArgs{Kubectl: kubectl}))
	if err != nil || code != 0 {
		return ""
	}
	return strings.TrimSpace(out)
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

const (
	adminConf   = nodefacts.AdminConf
	kubeletConf = nodefacts.KubeletConf
	kubectl     = "kubectl --kubeconfig " + adminConf
)

// initState is whether the node ran init to completion
// (nodefacts/state's answers).
func initState() scripts.Script {
	files := nodefacts.CompletionFiles(true, true)
	return nodeprobes.State(files[:1], files[1:]...)
}

// etcdAsideArgs are kubeadm/etcd-aside's values, which every reset
// includes: reportAside reads back the line it prints.
type etcdAsideArgs struct {
	Member, AsideDir, EtcdPattern, AsidePrefix string
}

var etcdAside = etcdAsideArgs{Member: nodefacts.EtcdMemberDir, AsideDir: nodefacts.EtcdAsideDir,
	EtcdPattern: nodefacts.ProcessPattern(nodefacts.Etcd), AsidePrefix: asidePrefix}

// resetKeepCAsArgs are kubeadm/reset-keep-cas's values. MarkerGlob is
// the product's own glob, not one word.
type resetKeepCAsArgs struct {
	etcdAsideArgs
	Keep, PKI, Manifests, KubeDir, MarkerGlob string
	Identity                                  []string
}

// resetKeepingCAs undoes an interrupted kubeadm run: the CAs are the
// bundle's and must survive it, or the retry would mint a new cluster
// identity, and etcd's data is moved aside, not deleted. The node's etcd
// member, if it has one, was removed first (removeOwnMember).
func resetKeepingCAs() scripts.Script {
	return scripts.Render("kubeadm/reset-keep-cas", resetKeepCAsArgs{etcdAsideArgs: etcdAside,
		Keep: nodefacts.KubernetesDir + "/.homelab-ca-keep", PKI: nodefacts.PKIDir, Manifests: nodefacts.ManifestsDir,
		KubeDir: nodefacts.KubernetesDir, MarkerGlob: nodefacts.MarkerGlob, Identity: nodefacts.IdentityFiles})
}

// uninterrupted lets a command finish when the user cancels an up:
// killing it half-way leaves a node that needs a reset. A bound still
// applies, so a hung command cannot hold the run forever.
func mustFinish(ctx context.Context, c ssh.Executor, node, what string, cmd scripts.Script) (string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Minute)
	defer cancel()
	return must(ctx, c, node, what, cmd)
}

// kubeadmRunArgs are kubeadm/init's and kubeadm/join's values: the
// config file, the completion marker, and the preflight errors to
// ignore, comma-separated as kubeadm takes them ("" for none).
type kubeadmRunArgs struct {
	Config, Marker, IgnorePreflight string
}

func initScript(in KubeadmInitArgs) scripts.Script {
	return scripts.Render("kubeadm/init", kubeadmRunArgs{Config: in.ConfigPath, Marker: nodefacts.InitMarker, IgnorePreflight: strings.Join(in.IgnorePreflight, ",")})
}

func joinScript(in KubeadmJoinArgs) scripts.Script {
	return scripts.Render("kubeadm/join", kubeadmRunArgs{Config: in.ConfigPath, Marker: nodefacts.JoinMarker, IgnorePreflight: strings.Join(in.IgnorePreflight, ",")})
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
			if f.etcdData && !consented(node) {
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

// The detached runs' names on the node (runDetached).
const (
	initRun = "kubeadm-init"
	joinRun = "kubeadm-join"
	aptRun  = "apt-install"
)

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

// pendingArgs are detached/pending's values.
type pendingArgs struct{ Dir string }

// settleDetached waits for (or collects) a detached run of name left by an
// earlier up, and says whether there was one.
func settleDetached(ctx context.Context, c ssh.Executor, node, name, what string) (bool, error) {
	d := runsDir + "/" + name
	out, _, err := query(ctx, c, scripts.Render("detached/pending", pendingArgs{Dir: d}))
	if err != nil || strings.TrimSpace(out) != "pending" {
		return false, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), detachedBound)
	defer cancel()
	p.GetLogger(ctx).Warningf("%s: %s from an earlier up is still there; waiting for its outcome", node, what)
	_, err = awaitDetached(ctx, c, node, what, d)
	return true, err
}

// settleBeforeReset is settleDetached for a step that may reset the node
// next: a run still going refuses the step (the node is busy), while one
// that failed or was lost leaves the node for the step to look at. It
// says whether an earlier up's run ended well here.
func settleBeforeReset(ctx context.Context, c ssh.Executor, node, name, what string) (bool, error) {
	found, err := settleDetached(ctx, c, node, name, what)
	var busy *busyError
	if errors.As(err, &busy) {
		return false, err
	}
	if err != nil {
		p.GetLogger(ctx).Warningf("%v", err)
		return false, nil
	}
	return found, nil
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
		if ready && !consented(node) {
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
		if err := removeOwnMember(ctx, in, f.etcdData && !consented(node)); err != nil {
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

// clusterClient connects to a control-plane node whose admin.conf the API
// answers to: via, else the first peer that does.
func clusterClient(ctx context.Context, via Connection, peers []Connection) (ssh.Executor, string, error) {
	var problems []string
	readyz := scripts.Render("cluster/readyz", clusterArgs{Kubectl: kubectl})
	for _, conn := range append([]Connection{via}, peers...) {
		if conn.Host == "" {
			continue
		}
		c, err := dial(ctx, conn)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		r, err := outliveBlips(ctx, func() (ssh.Result, error) { return c.Query(ctx, readyz.String()) })
		if err == nil && r.ExitCode == 0 {
			return c, conn.Node, nil
		}
		c.Close()
		problems = append(problems, conn.Node+": the API does not answer there")
	}
	return nil, "", fmt.Errorf("no control-plane node's API answers: %s", strings.Join(problems, "; "))
}

// nodeReady reports whether the cluster has a Node of that name reporting
// Ready.
func nodeReady(ctx context.Context, c ssh.Executor, node string) (bool, error) {
	out, code, err := query(ctx, c, scripts.Render("cluster/node-ready", clusterArgs{Kubectl: kubectl, Node: node}))
	if err != nil {
		return false, err
	}
	if code != 0 {
		return false, fmt.Errorf("reading Node %s through the API failed (exit %d)", node, code)
	}
	return strings.TrimSpace(out) == "True", nil
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

// leftovers is what a node keeps of the cluster until it is reset.
func leftovers(controlPlane bool) string {
	if controlPlane {
		return "the cluster's CA keys (ca.key, etcd/ca.key, front-proxy-ca.key), sa.key, the secrets encryption key, etcd's data and its kubelet credentials"
	}
	return "its kubelet credentials"
}

// resetArgs are kubeadm/reset's values. MarkerGlob is the product's own
// glob, not one word.
type resetArgs struct {
	etcdAsideArgs
	Manifests, KubeDir, MarkerGlob, Runs, EtcdData, KubeletPKI string
}

// resetNode resets a node leaving the cluster, its etcd data moved aside.
func resetNode() scripts.Script {
	return scripts.Render("kubeadm/reset", resetArgs{etcdAsideArgs: etcdAside,
		Manifests: nodefacts.ManifestsDir, KubeDir: nodefacts.KubernetesDir, MarkerGlob: nodefacts.MarkerGlob,
		Runs: runsDir, EtcdData: nodefacts.EtcdDataDir, KubeletPKI: nodefacts.KubeletPKIDir})
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
		if !consented(node) {
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
	if strings.TrimSpace(out) != nodefacts.StateNone && !consented(node) {
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
		if _, err := must(ctx, cl, clNode, "deleting Node "+node, scripts.Render("kubectl/delete-node", a)); err != nil {
			p.GetLogger(ctx).Warning(err.Error())
		}
		cl.Close()
	}
	if !st.ControlPlane {
		return nil
	}
	return removeOwnMember(ctx, st.KubeadmJoinArgs, false)
}
