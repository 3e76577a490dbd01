package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/homelab-dev/homelab/infra/ssh"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
)

// KubeadmInit is `kubeadm init` on the first control-plane node. Its live
// state is whether the node runs an initialised control plane; an init that
// was interrupted half-way is reset and run again, never duplicated.
type KubeadmInit struct{}

type KubeadmInitArgs struct {
	Connection Connection `pulumi:"connection"`
	ConfigPath string     `pulumi:"configPath"`
	// ConfigSha is the rendered config's checksum: a changed config is an
	// update (uploaded to the cluster), never a second init.
	ConfigSha       string   `pulumi:"configSha"`
	IgnorePreflight []string `pulumi:"ignorePreflight,optional"`
	// Peers are the other control-plane nodes. A first node found blank
	// (a replaced machine) while the cluster runs on a peer re-joins it as
	// a control-plane member with JoinConfigPath instead of starting a
	// second cluster; a peer that cannot be checked stops the init.
	Peers          []Connection `pulumi:"peers,optional"`
	JoinConfigPath string       `pulumi:"joinConfigPath,optional"`
	BootstrapToken string       `pulumi:"bootstrapToken,optional" provider:"secret"`
}

type KubeadmInitState struct {
	KubeadmInitArgs
	Initialized bool `pulumi:"initialized"`
	// AdminKubeconfig is /etc/kubernetes/admin.conf: cluster-admin access.
	AdminKubeconfig string `pulumi:"adminKubeconfig" provider:"secret"`
	// ClusterUID identifies the cluster (its kube-system namespace's UID):
	// it changes only when kubeadm init made a new one, and what lives in
	// the cluster (the pod network) follows it.
	ClusterUID string `pulumi:"clusterUID,optional"`
}

// clusterUIDCmd prints the cluster's identity.
const clusterUIDCmd = kubectl + " get namespace kube-system -o jsonpath='{.metadata.uid}'"

// readClusterUID is the cluster's identity, "" when the API does not say.
func readClusterUID(ctx context.Context, c *ssh.Client) string {
	out, code, err := query(ctx, c, clusterUIDCmd)
	if err != nil || code != 0 {
		return ""
	}
	return strings.TrimSpace(out)
}

// WireDependencies keeps the cluster's identity known in a preview: an
// updated config (an upload, never a second init) keeps the cluster, and
// what follows it (the pod network) must not show as changing. Update's dry
// run says when it may change (an init of a blank node).
func (k *KubeadmInit) WireDependencies(f infer.FieldSelector, args *KubeadmInitArgs, state *KubeadmInitState) {
	f.OutputField(&state.ClusterUID).AlwaysKnown()
}

func (k *KubeadmInit) Annotate(a infer.Annotator) {
	a.Describe(&k, "kubeadm init on the first control-plane node; reads back whether the control plane is initialised.")
	a.SetToken("index", "KubeadmInit")
}

const (
	// Markers written after kubeadm returned success: kubeadm writes
	// admin.conf and the manifests early, so their presence does not mean
	// an init or join finished (RBAC, configs and tokens come last).
	initMarker  = "/etc/kubernetes/.homelab-init-complete"
	joinMarker  = "/etc/kubernetes/.homelab-join-complete"
	adminConf   = "/etc/kubernetes/admin.conf"
	kubeletConf = "/etc/kubernetes/kubelet.conf"
	manifests   = "/etc/kubernetes/manifests"
	kubectl     = "kubectl --kubeconfig " + adminConf
)

// initialisedCheck prints "yes" when the node's control plane or kubelet
// was fully set up by kubeadm, "partial" when kubeadm left something
// behind (an interrupted run), "no" otherwise.
func stateCheck(complete ...string) string {
	var tests []string
	for _, f := range complete {
		tests = append(tests, "test -f "+f)
	}
	return "if " + strings.Join(tests, " && ") + "; then echo yes; " +
		"elif ls " + manifests + "/*.yaml >/dev/null 2>&1 || test -f " + kubeletConf + " || test -f " + adminConf + " || test -d /var/lib/etcd/member; then echo partial; else echo no; fi"
}

var initComplete = []string{initMarker, adminConf, manifests + "/kube-apiserver.yaml", manifests + "/etcd.yaml"}

// resetKeepingCAs undoes an interrupted kubeadm run. kubeadm reset deletes
// the certificates directory, CAs included; the CAs are the bundle's and
// must survive, or the retry would mint a new cluster identity.
const resetKeepingCAs = `set -e
b=/etc/kubernetes/.homelab-ca-keep
rm -rf "$b"; mkdir -p "$b/etcd"
for f in ca.crt ca.key sa.key sa.pub front-proxy-ca.crt front-proxy-ca.key etcd/ca.crt etcd/ca.key; do
  [ -f /etc/kubernetes/pki/$f ] && cp -p /etc/kubernetes/pki/$f "$b/$f"
done
kubeadm reset -f >/dev/null 2>&1 || true
rm -rf /etc/kubernetes/manifests/* /var/lib/etcd/member /etc/kubernetes/*.conf /etc/kubernetes/.homelab-*-complete
mkdir -p /etc/kubernetes/pki/etcd
cp -rp "$b"/. /etc/kubernetes/pki/
rm -rf "$b"`

// uninterrupted lets a kubeadm run finish when the user cancels an up:
// killing kubeadm half-way leaves a node that needs a reset. A bound still
// applies, so a hung kubeadm cannot hold the run forever.
func mustFinish(ctx context.Context, c *ssh.Client, node, what, cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Minute)
	defer cancel()
	return must(ctx, c, node, what, cmd)
}

func preflightFlag(ignore []string) string {
	if len(ignore) == 0 {
		return ""
	}
	return " --ignore-preflight-errors=" + quote(strings.Join(ignore, ","))
}

func (KubeadmInit) Create(ctx context.Context, req infer.CreateRequest[KubeadmInitArgs]) (infer.CreateResponse[KubeadmInitState], error) {
	in := req.Inputs
	st := KubeadmInitState{KubeadmInitArgs: in, Initialized: true}
	if req.DryRun {
		return infer.CreateResponse[KubeadmInitState]{ID: in.Connection.Node, Output: st}, nil
	}
	kc, uid, err := runInit(ctx, in)
	st.AdminKubeconfig, st.ClusterUID = kc, uid
	return infer.CreateResponse[KubeadmInitState]{ID: in.Connection.Node, Output: st}, err
}

// runInit returns admin.conf and the cluster's identity.
func runInit(ctx context.Context, in KubeadmInitArgs) (string, string, error) {
	c, err := dial(ctx, in.Connection)
	if err != nil {
		return "", "", err
	}
	defer c.Close()
	node := in.Connection.Node
	state, _, err := query(ctx, c, stateCheck(initComplete...))
	if err != nil {
		return "", "", err
	}
	state = strings.TrimSpace(state)
	if state == "yes" {
		// A cluster built before this state (adopted, or state lost): the
		// stored cluster config becomes ours, which later joins and
		// kubeadm upgrades read.
		p.GetLogger(ctx).Infof("%s: control plane already initialised; adopting it", node)
		if _, err := must(ctx, c, node, "uploading the kubeadm config", "kubeadm init phase upload-config kubeadm --config "+quote(in.ConfigPath)); err != nil {
			return "", "", err
		}
	} else {
		peer, err := livePeer(ctx, in.Peers)
		if err != nil {
			return "", "", fmt.Errorf("%s: %w", node, err)
		}
		if state == "partial" {
			p.GetLogger(ctx).Warningf("%s: an earlier kubeadm run was interrupted; resetting it (CAs kept)", node)
			if _, err := mustFinish(ctx, c, node, "resetting the interrupted run", resetKeepingCAs); err != nil {
				return "", "", err
			}
		}
		if peer != nil {
			if err := rejoinFirst(ctx, c, in, *peer); err != nil {
				return "", "", err
			}
		} else {
			cmd := "kubeadm init --config " + quote(in.ConfigPath) + " --skip-token-print --skip-certificate-key-print" + preflightFlag(in.IgnorePreflight) +
				" && touch " + initMarker
			if _, err := mustFinish(ctx, c, node, "kubeadm init", cmd); err != nil {
				return "", "", err
			}
		}
	}
	// kubeadm has run to completion whatever the user pressed meanwhile;
	// its result must reach the state too.
	kc, err := c.Read(context.WithoutCancel(ctx), adminConf)
	if err != nil {
		return "", "", fmt.Errorf("%s: reading %s: %w", node, adminConf, err)
	}
	return string(kc), readClusterUID(context.WithoutCancel(ctx), c), nil
}

// rejoinFirst brings a first control-plane node whose machine was replaced
// back into the cluster that runs on peer: the cluster outlived the
// machine, so this node joins it like any other control-plane node.
func rejoinFirst(ctx context.Context, c *ssh.Client, in KubeadmInitArgs, peer Connection) error {
	node := in.Connection.Node
	if in.JoinConfigPath == "" {
		return fmt.Errorf("%s is blank (a replaced machine?) while the cluster runs on %s, and it is the cluster's only endpoint "+
			"(single-ip layout), so it cannot re-join through itself: restore its disk, or rebuild the cluster (homelab destroy, then up); "+
			"the vip and dns layouts re-join such a node by themselves", node, peer.Node)
	}
	p.GetLogger(ctx).Warningf("%s is blank while the cluster runs on %s: re-joining it as a control-plane member, not running kubeadm init", node, peer.Node)
	peers := append([]Connection{peer}, in.Peers...)
	if err := forgetOldMachine(ctx, node, in.Connection.Host, true, peer, peers); err != nil {
		return err
	}
	if err := ensureToken(ctx, peer, in.BootstrapToken); err != nil {
		return err
	}
	cmd := "kubeadm join --config " + quote(in.JoinConfigPath) + preflightFlag(in.IgnorePreflight) + " && touch " + initMarker
	_, err := mustFinish(ctx, c, node, "kubeadm join (re-joining the replaced first control-plane node)", cmd)
	return err
}

func (KubeadmInit) Read(ctx context.Context, req infer.ReadRequest[KubeadmInitArgs, KubeadmInitState]) (infer.ReadResponse[KubeadmInitArgs, KubeadmInitState], error) {
	ctx = reading(ctx)
	st := req.State
	c, err := dial(ctx, st.Connection)
	if err != nil {
		// Unknown means re-checked: the init looks before it acts.
		if !unreachable(ctx, st.Connection.Node, err) {
			st.Initialized = false
		}
		return infer.ReadResponse[KubeadmInitArgs, KubeadmInitState]{ID: req.ID, Inputs: req.Inputs, State: st}, nil
	}
	defer c.Close()
	out, _, err := query(ctx, c, stateCheck(initComplete...))
	if err != nil {
		return infer.ReadResponse[KubeadmInitArgs, KubeadmInitState]{}, err
	}
	st.Initialized = strings.TrimSpace(out) == "yes"
	if st.Initialized {
		if kc, err := c.Read(ctx, adminConf); err == nil {
			st.AdminKubeconfig = string(kc)
		}
		if uid := readClusterUID(ctx, c); uid != "" {
			st.ClusterUID = uid
		}
	}
	return infer.ReadResponse[KubeadmInitArgs, KubeadmInitState]{ID: req.ID, Inputs: req.Inputs, State: st}, nil
}

func (KubeadmInit) Diff(ctx context.Context, req infer.DiffRequest[KubeadmInitArgs, KubeadmInitState]) (infer.DiffResponse, error) {
	d := map[string]p.PropertyDiff{}
	in, st := req.Inputs, req.State
	// Never replace: a second init would be a second cluster.
	if in.ConfigSha != st.ConfigSha {
		d["configSha"] = p.PropertyDiff{Kind: p.Update}
	}
	if !st.Initialized {
		d["initialized"] = p.PropertyDiff{Kind: p.Update}
	}
	if in.Connection != st.Connection {
		d["connection"] = p.PropertyDiff{Kind: p.Update}
	}
	return infer.DiffResponse{HasChanges: len(d) > 0, DetailedDiff: d}, nil
}

func (KubeadmInit) Update(ctx context.Context, req infer.UpdateRequest[KubeadmInitArgs, KubeadmInitState]) (infer.UpdateResponse[KubeadmInitState], error) {
	in, old := req.Inputs, req.State
	st := KubeadmInitState{KubeadmInitArgs: in, Initialized: true, AdminKubeconfig: old.AdminKubeconfig, ClusterUID: old.ClusterUID}
	if req.DryRun {
		if !old.Initialized {
			// Perhaps a new cluster (a rebuilt first node), perhaps the
			// same one re-joined: not known before it runs.
			st.ClusterUID = ""
		}
		return infer.UpdateResponse[KubeadmInitState]{Output: st}, nil
	}
	if !old.Initialized {
		kc, uid, err := runInit(ctx, in)
		st.AdminKubeconfig = kc
		if uid != "" {
			st.ClusterUID = uid
		}
		return infer.UpdateResponse[KubeadmInitState]{Output: st}, err
	}
	if in.ConfigSha != old.ConfigSha {
		c, err := dial(ctx, in.Connection)
		if err != nil {
			return infer.UpdateResponse[KubeadmInitState]{}, err
		}
		defer c.Close()
		// The cluster keeps its ClusterConfiguration in kubeadm-config;
		// later joins and upgrades read it from there.
		if _, err := must(ctx, c, in.Connection.Node, "uploading the new kubeadm config",
			"kubeadm init phase upload-config kubeadm --config "+quote(in.ConfigPath)); err != nil {
			return infer.UpdateResponse[KubeadmInitState]{}, err
		}
	}
	return infer.UpdateResponse[KubeadmInitState]{Output: st}, nil
}

func (KubeadmInit) Delete(ctx context.Context, req infer.DeleteRequest[KubeadmInitState]) (infer.DeleteResponse, error) {
	return infer.DeleteResponse{}, reset(ctx, req.State.Connection)
}

// reset undoes kubeadm on a node so a later up starts clean.
func reset(ctx context.Context, conn Connection) error {
	c, err := dial(ctx, conn)
	if err != nil {
		unreachable(ctx, conn.Node, err)
		return nil
	}
	defer c.Close()
	_, err = mustFinish(ctx, c, conn.Node, "kubeadm reset",
		"kubeadm reset -f >/dev/null 2>&1; systemctl stop kubelet >/dev/null 2>&1; rm -rf /etc/kubernetes/manifests/* /etc/kubernetes/*.conf /etc/kubernetes/.homelab-*-complete /var/lib/etcd /var/lib/kubelet/pki; true")
	return err
}

// KubeadmJoin is `kubeadm join` of one node, as a control-plane member or
// a worker. Its live state is whether the node's kubelet (and, for
// control-plane nodes, its etcd member and static pods) were set up.
type KubeadmJoin struct{}

type KubeadmJoinArgs struct {
	Connection      Connection `pulumi:"connection"`
	ConfigPath      string     `pulumi:"configPath"`
	ConfigSha       string     `pulumi:"configSha"`
	ControlPlane    bool       `pulumi:"controlPlane"`
	IgnorePreflight []string   `pulumi:"ignorePreflight,optional"`
	// Via is a control-plane node with admin.conf: tokens are refreshed
	// and removed Nodes deleted there.
	Via Connection `pulumi:"via"`
	// BootstrapToken is re-created on Via when it expired (joins long after
	// init must not depend on kubeadm's 24 h token).
	BootstrapToken string `pulumi:"bootstrapToken" provider:"secret"`
	// Peers are the control-plane nodes etcd is reached through, to remove
	// the stale member of a replaced control-plane node before it joins.
	Peers []Connection `pulumi:"peers,optional"`
}

type KubeadmJoinState struct {
	KubeadmJoinArgs
	Joined bool `pulumi:"joined"`
}

func (k *KubeadmJoin) Annotate(a infer.Annotator) {
	a.Describe(&k, "kubeadm join of a node; reads back whether the node is joined.")
	a.SetToken("index", "KubeadmJoin")
}

func (j KubeadmJoinArgs) complete() []string {
	if j.ControlPlane {
		return []string{joinMarker, kubeletConf, manifests + "/kube-apiserver.yaml", manifests + "/etcd.yaml"}
	}
	return []string{joinMarker, kubeletConf}
}

func (KubeadmJoin) Create(ctx context.Context, req infer.CreateRequest[KubeadmJoinArgs]) (infer.CreateResponse[KubeadmJoinState], error) {
	in := req.Inputs
	st := KubeadmJoinState{KubeadmJoinArgs: in, Joined: true}
	if req.DryRun {
		return infer.CreateResponse[KubeadmJoinState]{ID: in.Connection.Node, Output: st}, nil
	}
	return infer.CreateResponse[KubeadmJoinState]{ID: in.Connection.Node, Output: st}, runJoin(ctx, in)
}

func runJoin(ctx context.Context, in KubeadmJoinArgs) error {
	c, err := dial(ctx, in.Connection)
	if err != nil {
		return err
	}
	defer c.Close()
	node := in.Connection.Node
	state, _, err := query(ctx, c, stateCheck(in.complete()...))
	if err != nil {
		return err
	}
	switch strings.TrimSpace(state) {
	case "yes":
		p.GetLogger(ctx).Infof("%s: already joined; adopting it", node)
		return nil
	case "partial":
		p.GetLogger(ctx).Warningf("%s: an earlier kubeadm run was interrupted; resetting it before join", node)
		if _, err := mustFinish(ctx, c, node, "resetting the interrupted join", resetKeepingCAs); err != nil {
			return err
		}
	}
	if err := forgetOldMachine(ctx, node, in.Connection.Host, in.ControlPlane, in.Via, in.Peers); err != nil {
		return err
	}
	if err := ensureToken(ctx, in.Via, in.BootstrapToken); err != nil {
		return err
	}
	cmd := "kubeadm join --config " + quote(in.ConfigPath) + preflightFlag(in.IgnorePreflight) + " && touch " + joinMarker
	_, err = mustFinish(ctx, c, node, "kubeadm join", cmd)
	return err
}

// ensureToken re-creates the bootstrap token when it has expired. The
// token goes over stdin, never on a command line or into a log.
func ensureToken(ctx context.Context, via Connection, token string) error {
	c, err := dial(ctx, via)
	if err != nil {
		return err
	}
	defer c.Close()
	id, _, _ := strings.Cut(token, ".")
	r, err := c.RunInput(ctx, `read -r t; kubeadm token list -o jsonpath='{.token}{"\n"}' 2>/dev/null | grep -q "^`+id+`\." || kubeadm token create "$t" --ttl 2h >/dev/null`, []byte(token+"\n"))
	if err != nil {
		return fmt.Errorf("%s: refreshing the bootstrap token: %w", via.Node, err)
	}
	if r.ExitCode != 0 {
		return fmt.Errorf("%s: refreshing the bootstrap token failed: %s", via.Node, redact(string(r.Stderr)))
	}
	// kubeadm's discovery retries every 5 s until cluster-info is signed
	// for the token (the bootstrap signer does so seconds after init);
	// waiting here at a finer grain takes those seconds off every first join.
	sig := kubectl + " -n kube-public get configmap cluster-info -o jsonpath='{.data.jws-kubeconfig-" + id + "}'"
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		out, _, err := query(ctx, c, sig)
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return nil // kubeadm's own discovery will wait and report
}

func (KubeadmJoin) Read(ctx context.Context, req infer.ReadRequest[KubeadmJoinArgs, KubeadmJoinState]) (infer.ReadResponse[KubeadmJoinArgs, KubeadmJoinState], error) {
	ctx = reading(ctx)
	st := req.State
	st.Via = currentVia(st.Via, req.Inputs.Via)
	c, err := dial(ctx, st.Connection)
	if err != nil {
		if !unreachable(ctx, st.Connection.Node, err) {
			st.Joined = false
		}
		return infer.ReadResponse[KubeadmJoinArgs, KubeadmJoinState]{ID: req.ID, Inputs: req.Inputs, State: st}, nil
	}
	defer c.Close()
	out, _, err := query(ctx, c, stateCheck(st.complete()...))
	if err != nil {
		return infer.ReadResponse[KubeadmJoinArgs, KubeadmJoinState]{}, err
	}
	st.Joined = strings.TrimSpace(out) == "yes"
	return infer.ReadResponse[KubeadmJoinArgs, KubeadmJoinState]{ID: req.ID, Inputs: req.Inputs, State: st}, nil
}

func (KubeadmJoin) Diff(ctx context.Context, req infer.DiffRequest[KubeadmJoinArgs, KubeadmJoinState]) (infer.DiffResponse, error) {
	d := map[string]p.PropertyDiff{}
	in, st := req.Inputs, req.State
	if in.ControlPlane != st.ControlPlane {
		d["controlPlane"] = p.PropertyDiff{Kind: p.UpdateReplace}
	}
	if !st.Joined {
		d["joined"] = p.PropertyDiff{Kind: p.Update}
	}
	// A new join config (a label, a taint) matters to a node not yet
	// joined; labels and taints of joined nodes are NodeMeta's job.
	if in.ConfigSha != st.ConfigSha {
		d["configSha"] = p.PropertyDiff{Kind: p.Update}
	}
	if in.Connection != st.Connection || in.Via.Node != st.Via.Node {
		d["connection"] = p.PropertyDiff{Kind: p.Update}
	}
	return infer.DiffResponse{HasChanges: len(d) > 0, DetailedDiff: d, DeleteBeforeReplace: true}, nil
}

func (KubeadmJoin) Update(ctx context.Context, req infer.UpdateRequest[KubeadmJoinArgs, KubeadmJoinState]) (infer.UpdateResponse[KubeadmJoinState], error) {
	st := KubeadmJoinState{KubeadmJoinArgs: req.Inputs, Joined: true}
	if req.DryRun || req.State.Joined {
		return infer.UpdateResponse[KubeadmJoinState]{Output: st}, nil
	}
	return infer.UpdateResponse[KubeadmJoinState]{Output: st}, runJoin(ctx, req.Inputs)
}

// Delete drains and removes the node from the cluster, then resets it.
// On a control-plane node kubeadm reset also removes its etcd member.
func (KubeadmJoin) Delete(ctx context.Context, req infer.DeleteRequest[KubeadmJoinState]) (infer.DeleteResponse, error) {
	st := req.State
	if via, err := dial(ctx, st.Via); err == nil {
		name := quote(st.Connection.Node)
		_, _ = via.Run(ctx, kubectl+" drain "+name+" --ignore-daemonsets --delete-emptydir-data --force --timeout=60s")
		defer via.Close()
		defer func() {
			if _, err := must(ctx, via, st.Via.Node, "deleting Node "+st.Connection.Node, kubectl+" delete node "+name+" --ignore-not-found"); err != nil {
				p.GetLogger(ctx).Warning(err.Error())
			}
		}()
	}
	return infer.DeleteResponse{}, reset(ctx, st.Connection)
}
