package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/homelab-dev/homelab/infra/cniconf"
	"github.com/homelab-dev/homelab/infra/helmrelease"
	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/cilium"
)

// Dataplane is the cluster's pod network and who implements Services:
// Cilium is the CNI in every mode, and either kube-proxy or Cilium's eBPF
// kube-proxy replacement serves Services. Its live state is what the
// cluster runs (the kube-proxy DaemonSet and ConfigMap, the Cilium release
// and its values, nodes whose runtime has no pod network, KUBE-* rules left
// on nodes), so changing cluster.kubeProxy.replacement swaps a live
// cluster in the order that never leaves Services unserved, and a node
// that lost its CNI configuration is repaired.
//
// Fresh: the release is installed with the replacement on or off, then
// every agent must be ready and every Node Ready (a node that is not is
// reported with its own Ready condition). To the replacement: upgrade the
// release with it on and wait for every agent; only then delete
// kube-proxy's objects and its rules on every node. Back: restore
// kube-proxy with kubeadm and wait for it; only then upgrade the release
// with the replacement off. The swap switches only the replacement: Cilium
// stays the CNI, and uninstalling it would cut every pod's network.
// With cluster.cni none no release is installed (the user brings a CNI).
type Dataplane struct{}

type DataplaneArgs struct {
	// Via is the bootstrap node (inventory.Bootstrap): admin.conf, kubeadm
	// and the rendered init config are there.
	Via Connection `pulumi:"via"`
	// Nodes are every node, whose KUBE-* rules go once kube-proxy is gone.
	// A means, not desired state: a new node changes nothing here.
	Nodes []Connection `pulumi:"nodes"`
	// Replacement is none (kube-proxy) or cilium.
	Replacement string `pulumi:"replacement"`
	// CNI is cilium (installed here) or none (the user's own); empty is
	// cilium.
	CNI string `pulumi:"cni,optional"`
	// ClusterUID is the cluster's identity (KubeadmInit's): a cluster
	// kubeadm init made anew (every machine rebuilt) gets its pod network
	// installed again.
	ClusterUID string `pulumi:"clusterUID,optional"`
	// InitConfigPath is kubeadm's init config on Via: restoring kube-proxy
	// renders it from there, with the inventory's mode.
	InitConfigPath string `pulumi:"initConfigPath"`
	// Values are the Cilium release's values (YAML).
	Values string `pulumi:"values"`
	// Chart is a chart archive's path on the machine running homelab; empty
	// for the official repository at ChartVersion.
	Chart        string `pulumi:"chart,optional"`
	ChartSha     string `pulumi:"chartSha,optional"`
	ChartRepo    string `pulumi:"chartRepo"`
	ChartName    string `pulumi:"chartName"`
	ChartVersion string `pulumi:"chartVersion"`
	Release      string `pulumi:"release"`
	Namespace    string `pulumi:"namespace"`
	TimeoutSec   int    `pulumi:"timeoutSeconds,optional"`
	// Wait is no longer used (every swap waits for kube-proxy ready);
	// stacks made by earlier versions hold it, and infer refuses state
	// with a key no field takes.
	Wait string `pulumi:"wait,optional"`
}

type DataplaneState struct {
	DataplaneArgs
	// KubeProxy: the kube-proxy DaemonSet or ConfigMap exists.
	KubeProxy bool `pulumi:"kubeProxy"`
	// ReleasePresent, ReleaseChart and ReleaseValues: the Cilium release.
	ReleasePresent bool   `pulumi:"releasePresent"`
	ReleaseChart   string `pulumi:"releaseChart,optional"`
	ReleaseValues  string `pulumi:"releaseValues,optional"`
	// StaleRules names the nodes still holding kube-proxy's rules while
	// Cilium replaces it (read only then: with kube-proxy they are its own).
	StaleRules []string `pulumi:"staleRules,optional"`
	// NetworkNotReady names the declared nodes whose Ready condition says
	// their runtime has no pod network (its CNI configuration gone).
	NetworkNotReady []string `pulumi:"networkNotReady,optional"`
}

func (d *Dataplane) Annotate(a infer.Annotator) {
	a.Describe(&d, "Cilium as the pod network, with kube-proxy or Cilium's kube-proxy replacement; reads back the kube-proxy objects, the Cilium release, nodes without a pod network and stale KUBE-* rules.")
	a.SetToken("index", "Dataplane")
}

// canonical turns values (YAML or JSON) into sorted JSON so the desired and
// the live values compare equal whatever their formatting.
func canonical(values string) string {
	m, err := helmrelease.ParseValues([]byte(values))
	if err != nil {
		return values
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func (a DataplaneArgs) cilium() bool { return a.Replacement == "cilium" }

// ciliumCNI: homelab installs Cilium as the pod network.
func (a DataplaneArgs) ciliumCNI() bool { return a.CNI != "none" }

func (a DataplaneArgs) timeout() time.Duration {
	if a.TimeoutSec > 0 {
		return time.Duration(a.TimeoutSec) * time.Second
	}
	return 5 * time.Minute
}

func (a DataplaneArgs) chart() helmrelease.Chart {
	return helmrelease.Chart{Path: a.Chart, RepoURL: a.ChartRepo, Name: a.ChartName, Version: a.ChartVersion}
}

func (a DataplaneArgs) chartChanged(b DataplaneArgs) bool {
	return a.Chart != b.Chart || a.ChartSha != b.ChartSha || a.ChartRepo != b.ChartRepo || a.ChartName != b.ChartName || a.ChartVersion != b.ChartVersion
}

// desired is the state a converged cluster reads back as.
func desiredDataplane(in DataplaneArgs, old DataplaneState) DataplaneState {
	st := DataplaneState{DataplaneArgs: in, KubeProxy: !in.cilium()}
	st.ReleasePresent = in.ciliumCNI() || old.ReleasePresent
	switch {
	case in.ciliumCNI():
		st.ReleaseValues = canonical(in.Values)
		st.ReleaseChart = old.ReleaseChart
	case old.ReleasePresent:
		// A release left from before cni: none is the user's now.
		st.ReleaseValues, st.ReleaseChart = old.ReleaseValues, old.ReleaseChart
	}
	return st
}

// changes lists what converging would change, keyed as the preview shows it.
func dataplaneChanges(in DataplaneArgs, st DataplaneState) changeSet {
	d := changeSet{}
	if in.Replacement != st.Replacement {
		d.update("replacement")
	}
	if in.cilium() == st.KubeProxy {
		d.update("kubeProxy")
	}
	if in.ciliumCNI() {
		if !st.ReleasePresent {
			d.update("releasePresent")
		}
		if canonical(in.Values) != st.ReleaseValues {
			d.update("values")
		}
		if in.chartChanged(st.DataplaneArgs) {
			d.update("chart")
		}
		if len(st.NetworkNotReady) > 0 {
			d.update("networkNotReady")
		}
	}
	if in.CNI != st.CNI {
		d.update("cni")
	}
	if in.ClusterUID != st.ClusterUID {
		d.update("cluster")
	}
	if in.cilium() && len(st.StaleRules) > 0 {
		d.update("staleRules")
	}
	return d
}

func (Dataplane) Create(ctx context.Context, req infer.CreateRequest[DataplaneArgs]) (infer.CreateResponse[DataplaneState], error) {
	in := req.Inputs
	if req.DryRun {
		return infer.CreateResponse[DataplaneState]{ID: "dataplane", Output: desiredDataplane(in, DataplaneState{})}, nil
	}
	st, err := convergeDataplane(ctx, in, nil)
	return infer.CreateResponse[DataplaneState]{ID: "dataplane", Output: st}, err
}

func (Dataplane) Update(ctx context.Context, req infer.UpdateRequest[DataplaneArgs, DataplaneState]) (infer.UpdateResponse[DataplaneState], error) {
	if req.DryRun {
		return infer.UpdateResponse[DataplaneState]{Output: desiredDataplane(req.Inputs, req.State)}, nil
	}
	st, err := convergeDataplane(ctx, req.Inputs, &req.State.DataplaneArgs)
	return infer.UpdateResponse[DataplaneState]{Output: st}, err
}

func (Dataplane) Diff(ctx context.Context, req infer.DiffRequest[DataplaneArgs, DataplaneState]) (infer.DiffResponse, error) {
	return dataplaneChanges(req.Inputs, req.State).diff(false), nil
}

// dataplaneRead keeps the last known state whatever kept the cluster from
// being read: the API down (a control plane being repaired) must not fail
// a whole refresh, and what the cluster runs is read through the latest
// inputs' Via, so a refusal is of the current key too and no step could
// look with another. Update reads the cluster again before it changes it.
var dataplaneRead = keepLastState[DataplaneState]()

func (Dataplane) Read(ctx context.Context, req infer.ReadRequest[DataplaneArgs, DataplaneState]) (infer.ReadResponse[DataplaneArgs, DataplaneState], error) {
	ctx = reading(ctx)
	last := req.State
	last.Via = currentVia(last.Via, req.Inputs.Via)
	st, err := readNode(ctx, last.Via, last, dataplaneRead, func(c ssh.Executor) (DataplaneState, error) {
		live, _, err := readDataplane(ctx, c, last.DataplaneArgs)
		if err != nil {
			return last, unanswered(err)
		}
		live.DataplaneArgs = last.DataplaneArgs
		return live, nil
	})
	if err != nil {
		return infer.ReadResponse[DataplaneArgs, DataplaneState]{}, err
	}
	return infer.ReadResponse[DataplaneArgs, DataplaneState]{ID: req.ID, Inputs: req.Inputs, State: st}, nil
}

// Delete runs when the stack is destroyed, before the nodes are reset:
// the release is uninstalled (its agents would rewrite their
// configuration), then what they wrote on the nodes goes, as Cilium's own
// uninstall does it. kubeadm reset leaves /etc/cni/net.d alone, and a
// stale 05-cilium.conflist would make a rebuilt node's runtime report its
// network ready before any CNI runs.
func (Dataplane) Delete(ctx context.Context, req infer.DeleteRequest[DataplaneState]) (infer.DeleteResponse, error) {
	st := req.State
	if !st.ciliumCNI() {
		return infer.DeleteResponse{}, nil
	}
	// Uninstalling the pod network cuts every pod's network on every node:
	// only with consent for all of them (destroy gives it).
	if !consented(ctx, "*") {
		return infer.DeleteResponse{}, refused("*", "uninstalling the Cilium pod network", "cut every pod's network")
	}
	log := p.GetLogger(ctx)
	if c, err := dial(ctx, st.Via); err != nil {
		log.Warningf("%s: not reachable (%v): the Cilium release is left as it is", st.Via.Node, err)
	} else {
		t, err := releaseTarget(ctx, c, st.DataplaneArgs)
		if err == nil {
			err = c.Note(fmt.Sprintf("helm uninstall %s/%s", st.Namespace, st.Release))
		}
		if err == nil {
			err = helmrelease.Uninstall(ctx, t, st.timeout())
		}
		c.Close()
		if err != nil {
			log.Warningf("uninstalling the Cilium release: %v", err)
		}
	}
	for _, n := range st.Nodes {
		c, err := dial(ctx, n)
		if err != nil {
			log.Warningf("%s: not reachable (%v): remove %s/%s by hand before reusing it", n.Node, err, cniconf.ConfDir, cilium.ConfigFile)
			continue
		}
		_, err = must(ctx, c, n.Node, "removing Cilium's CNI configuration", ciliumCNIRemove())
		c.Close()
		if err != nil {
			return infer.DeleteResponse{}, err
		}
	}
	return infer.DeleteResponse{}, nil
}

type ciliumCNIArgs struct{ ConfDir, ConfFile, BinDir string }

// ciliumCNIRemove is Cilium's cni-uninstall: its configuration and plugin
// go, other networks' configurations it set aside come back.
func ciliumCNIRemove() scripts.Script {
	return scripts.Render("dataplane/cilium-cni-remove", ciliumCNIArgs{ConfDir: cniconf.ConfDir, ConfFile: cilium.ConfigFile, BinDir: cniconf.BinDir})
}

// kubectlArgs are the scripts that only run kubectl as the admin.
type kubectlArgs struct{ Kubectl string }

func kubeProxyScript(name string) scripts.Script {
	return scripts.Render("dataplane/"+name, kubectlArgs{Kubectl: kubectl})
}

// readDataplane also returns the release's status (deployed, failed,
// pending-...), which is no desired state of its own.
func readDataplane(ctx context.Context, c ssh.Executor, in DataplaneArgs) (st DataplaneState, status string, err error) {
	st = DataplaneState{DataplaneArgs: in}
	out, err := queryAPI(ctx, c, kubeProxyScript("kube-proxy-objects"))
	if err != nil {
		return st, "", fmt.Errorf("%s: reading kube-proxy's objects: %w", in.Via.Node, err)
	}
	st.KubeProxy = strings.TrimSpace(out) != ""
	rel, err := getRelease(ctx, c, in)
	if err != nil {
		return st, "", err
	}
	if rel.Present {
		st.ReleasePresent, st.ReleaseChart = true, rel.Chart
		status = rel.Status
		b, _ := json.Marshal(rel.Values)
		st.ReleaseValues = string(b)
	}
	if in.ciliumCNI() {
		cs, err := apiClient(ctx, c, in.Via.Node)
		if err != nil {
			return st, "", err
		}
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return st, "", err
		}
		var want []string
		for _, n := range in.Nodes {
			want = append(want, n.Node)
		}
		st.NetworkNotReady = networkNotReady(nodes.Items, want)
	}
	if in.cilium() {
		for _, n := range in.Nodes {
			stale, err := nodeHasKubeRules(ctx, n)
			if err != nil {
				// Checked again at the next read; the up's cleanup
				// (cleanKubeRules) needs the node and fails without it.
				logUnread(ctx, n.Node, err, "its kube-proxy rules are not checked")
				continue
			}
			if stale {
				st.StaleRules = append(st.StaleRules, n.Node)
			}
		}
	}
	return st, status, nil
}

func releaseTarget(ctx context.Context, c ssh.Executor, in DataplaneArgs) (helmrelease.Target, error) {
	kc, err := c.Read(ctx, adminConf)
	if err != nil {
		return helmrelease.Target{}, fmt.Errorf("%s: reading %s: %w", in.Via.Node, adminConf, err)
	}
	// Through the SSH connection: the API endpoint (a VIP on the nodes'
	// LAN) need not be routable from the machine running homelab.
	return helmrelease.Target{Kubeconfig: kc, Dial: c.DialContext, Namespace: in.Namespace, Release: in.Release}, nil
}

func getRelease(ctx context.Context, c ssh.Executor, in DataplaneArgs) (helmrelease.Live, error) {
	t, err := releaseTarget(ctx, c, in)
	if err != nil {
		return helmrelease.Live{}, err
	}
	return helmrelease.Get(ctx, t)
}

// convergeDataplane brings the cluster to in, reading first so a half-done swap
// (interrupted after Cilium came up, say) resumes where it stopped.
func convergeDataplane(ctx context.Context, in DataplaneArgs, old *DataplaneArgs) (DataplaneState, error) {
	c, err := dial(ctx, in.Via)
	if err != nil {
		return DataplaneState{}, err
	}
	defer c.Close()
	live, status, err := readDataplaneSettled(ctx, c, in)
	if err != nil {
		return DataplaneState{}, err
	}
	log := p.GetLogger(ctx)
	if !in.ciliumCNI() {
		if !live.KubeProxy {
			if err := restoreKubeProxy(ctx, c, in); err != nil {
				return live, err
			}
		}
		log.Warningf("cluster.cni is none: homelab installs no pod network; every node stays NotReady (container runtime network not ready) until you install one")
		return reread(ctx, c, in)
	}
	// Only when something differs: every upgrade is a new revision and a
	// restart of Cilium's agents.
	stale := !live.ReleasePresent || status != "deployed" || canonical(in.Values) != live.ReleaseValues ||
		old == nil || in.chartChanged(*old)
	if in.cilium() {
		if stale {
			if err := applyRelease(ctx, c, in, "with the kube-proxy replacement on"); err != nil {
				return live, err
			}
		}
		// Every agent in replacement mode before kube-proxy goes: Helm's
		// wait lets some agents still be restarting.
		if err := repairAndWaitNetwork(ctx, c, in, live, stale); err != nil {
			return live, err
		}
		if live.KubeProxy {
			log.Infof("Cilium is up; removing kube-proxy")
			if _, err := must(ctx, c, in.Via.Node, "deleting kube-proxy's DaemonSet and ConfigMap", kubeProxyScript("kube-proxy-delete")); err != nil {
				return live, err
			}
		}
		// Always, not only after a swap: kube-proxy's pods may still have
		// been programming rules while the DaemonSet went away.
		for _, n := range in.Nodes {
			if err := cleanKubeRules(ctx, n); err != nil {
				return live, err
			}
		}
		return reread(ctx, c, in)
	}
	if !live.KubeProxy {
		log.Infof("restoring kube-proxy before turning Cilium's replacement off")
		if err := restoreKubeProxy(ctx, c, in); err != nil {
			return live, err
		}
	}
	if stale {
		what := "with the kube-proxy replacement off"
		if !live.ReleasePresent {
			what = "as the pod network, kube-proxy serving Services"
		}
		if err := applyRelease(ctx, c, in, what); err != nil {
			return live, err
		}
	}
	if err := repairAndWaitNetwork(ctx, c, in, live, stale); err != nil {
		return live, err
	}
	return reread(ctx, c, in)
}

// repairAndWaitNetwork restarts the agents of nodes that lost their pod
// network (unless the release was just applied, which rolled them all) and
// waits until every agent is ready and every node Ready.
func repairAndWaitNetwork(ctx context.Context, c ssh.Executor, in DataplaneArgs, live DataplaneState, applied bool) error {
	if !applied && len(live.NetworkNotReady) > 0 {
		if err := restartAgents(ctx, c, in, live.NetworkNotReady); err != nil {
			return err
		}
	}
	return waitNetwork(ctx, c, in)
}

type kubeProxyRestoreArgs struct{ Config string }

func kubeProxyRestore(config string) scripts.Script {
	return scripts.Render("dataplane/kube-proxy-restore", kubeProxyRestoreArgs{Config: config})
}

func restoreKubeProxy(ctx context.Context, c ssh.Executor, in DataplaneArgs) error {
	if _, err := must(ctx, c, in.Via.Node, "restoring kube-proxy", kubeProxyRestore(in.InitConfigPath)); err != nil {
		return err
	}
	return waitKubeProxy(ctx, c, in)
}

// readDataplaneSettled reads, giving an API that is restarting (a
// regenerated manifest, a moved VIP) a minute to answer.
func readDataplaneSettled(ctx context.Context, c ssh.Executor, in DataplaneArgs) (DataplaneState, string, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		st, status, err := readDataplane(ctx, c, in)
		if err == nil || time.Now().After(deadline) {
			return st, status, err
		}
		select {
		case <-ctx.Done():
			return st, status, err
		case <-time.After(3 * time.Second):
		}
	}
}

func reread(ctx context.Context, c ssh.Executor, in DataplaneArgs) (DataplaneState, error) {
	st, _, err := readDataplane(ctx, c, in)
	return st, err
}

func applyRelease(ctx context.Context, c ssh.Executor, in DataplaneArgs, what string) error {
	ch, err := in.chart().Load()
	if err != nil {
		return err
	}
	values, err := helmrelease.ParseValues([]byte(in.Values))
	if err != nil {
		return err
	}
	t, err := releaseTarget(ctx, c, in)
	if err != nil {
		return err
	}
	log := p.GetLogger(ctx)
	log.Infof("applying release %s (chart %s %s) %s", in.Release, ch.Metadata.Name, ch.Metadata.Version, what)
	if err := c.Note(fmt.Sprintf("helm apply %s/%s (chart %s %s)", in.Namespace, in.Release, ch.Metadata.Name, ch.Metadata.Version)); err != nil {
		return err
	}
	_, err = helmrelease.Apply(ctx, t, ch, values, in.timeout(), nil)
	return err
}

// waitKubeProxy waits until the DaemonSet has an available pod on every
// node: Cilium's replacement must not be turned off before kube-proxy
// serves Services.
func waitKubeProxy(ctx context.Context, c ssh.Executor, in DataplaneArgs) error {
	status := kubeProxyScript("kube-proxy-status")
	deadline := time.Now().Add(in.timeout())
	last := ""
	for {
		out, code, err := query(ctx, c, status)
		if err != nil {
			return err
		}
		last = strings.TrimSpace(out)
		if code == 0 && kubeProxyDone(last) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-proxy did not become ready on every node within %s (generation observed desired current updated available: %s); Cilium's replacement stays on", in.timeout(), last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

func kubeProxyDone(status string) bool {
	f := strings.Fields(status)
	if len(f) < 5 {
		return false
	}
	n := make([]int, 6)
	for i := range f {
		n[i], _ = strconv.Atoi(f[i])
	}
	gen, observed, desired, current, updated, available := n[0], n[1], n[2], n[3], n[4], n[5]
	if observed < gen || desired == 0 || current < desired || updated < desired {
		return false
	}
	return available >= desired
}

// kubeletChains are KUBE-* chains the kubelet owns, not kube-proxy: they
// stay.
const kubeletChains = `KUBE-(KUBELET-CANARY|IPTABLES-HINT|FIREWALL)`

type kubeRulesArgs struct {
	// Keep are the KUBE-* chains that stay (an extended regular
	// expression).
	Keep string
}

// kubeRules renders dataplane/kube-rules-check, which prints what
// kube-proxy left on a node (iptables rules and chains, its nftables
// tables, the IPVS dummy interface), or dataplane/kube-rules-clean, which
// removes it as `kube-proxy --cleanup` would, without needing the
// kube-proxy binary on the node.
func kubeRules(name string) scripts.Script {
	return scripts.Render("dataplane/"+name, kubeRulesArgs{Keep: kubeletChains})
}

func nodeHasKubeRules(ctx context.Context, n Connection) (bool, error) {
	c, err := dial(ctx, n)
	if err != nil {
		return false, err
	}
	defer c.Close()
	out, _, err := query(ctx, c, kubeRules("kube-rules-check"))
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(out) != "", nil
}

func cleanKubeRules(ctx context.Context, n Connection) error {
	c, err := dial(ctx, n)
	if err != nil {
		return err
	}
	defer c.Close()
	out, _, err := query(ctx, c, kubeRules("kube-rules-check"))
	if err != nil {
		return err
	}
	if strings.TrimSpace(out) == "" {
		return nil
	}
	p.GetLogger(ctx).Infof("%s: removing kube-proxy's rules (%s)", n.Node, strings.ReplaceAll(strings.TrimSpace(out), "\n", ", "))
	_, err = must(ctx, c, n.Node, "removing kube-proxy's rules", kubeRules("kube-rules-clean"))
	return err
}
