package provider

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	p "github.com/pulumi/pulumi-go-provider"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/nodeprobes"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// A node kubeadm left "partial" (its completion marker or one of the
// files a set-up node has missing) may hold the cluster's only copy of
// etcd's data: admin.conf deleted as hardening, the manifests moved aside
// for kubeadm's documented etcd restore, an interrupted `homelab etcd
// restore`. What a reset would take is read first; a set-up node is
// repaired over its data, and whatever a reset takes is moved aside.

// partialFacts is what decides between repairing and resetting a
// partial control-plane node.
type partialFacts struct {
	// etcdData: the node holds an etcd member's data.
	etcdData bool
	// marked: init or join once finished here (homelab's marker), so
	// the node was set up and lost files since.
	marked bool
	// restoreAside: an interrupted restore left the manifests aside.
	restoreAside bool
}

var partialScript = nodeprobes.Presence(append(nodefacts.Files(nodefacts.InitMarker, nodefacts.JoinMarker),
	nodefacts.Trace{Path: nodefacts.EtcdWALDir, Kind: nodefacts.Dir}, nodefacts.Trace{Path: nodefacts.RestoreAsideDir, Kind: nodefacts.Dir})...)

func readPartial(ctx context.Context, c ssh.Executor) (partialFacts, error) {
	out, _, err := query(ctx, c, partialScript)
	if err != nil {
		return partialFacts{}, err
	}
	f := nodefacts.ParsePresence(out)
	return partialFacts{
		etcdData:     f[nodefacts.EtcdWALDir],
		marked:       f[nodefacts.InitMarker] || f[nodefacts.JoinMarker],
		restoreAside: f[nodefacts.RestoreAsideDir],
	}, nil
}

// asidePrefix starts the line kubeadm/etcd-aside prints with where the
// data went.
const asidePrefix = "etcd-aside="

// reportAside tells where a reset put the node's etcd data and how to
// bring it back; out is the reset script's output.
func reportAside(ctx context.Context, node, out string) {
	for _, line := range strings.Split(out, "\n") {
		if dir, ok := strings.CutPrefix(strings.TrimSpace(line), asidePrefix); ok && dir != "" {
			p.GetLogger(ctx).Warningf("%s: its etcd data was moved aside, not deleted: %s. To bring it back as the cluster's data: "+
				"on %s, with its control plane stopped, mv %s %s/ then homelab etcd restore --from-data %s", node, dir, node, dir, nodefacts.EtcdDataDir, node)
		}
	}
}

// repairArgs are bootstrap/repair's values.
type repairArgs struct {
	// Aside is where an interrupted restore set the manifests aside;
	// Manifests is where they go back.
	Aside, Manifests string
	// Config is the cluster's init config on the node.
	Config string
	Phases []repairPhase
}

// repairPhase is a file a set-up control-plane node has, and the kubeadm
// init phase that writes it.
type repairPhase struct {
	File, Phase string
}

// repairCerts are the leaf certificates of a control-plane node, each
// with the certs phase that signs it from the CAs the bundle put there.
var repairCerts = []repairPhase{
	{nodefacts.PKIFile("apiserver.crt"), "certs apiserver"},
	{nodefacts.PKIFile("apiserver-kubelet-client.crt"), "certs apiserver-kubelet-client"},
	{nodefacts.PKIFile("apiserver-etcd-client.crt"), "certs apiserver-etcd-client"},
	{nodefacts.PKIFile("front-proxy-client.crt"), "certs front-proxy-client"},
	{nodefacts.PKIFile("etcd/server.crt"), "certs etcd-server"},
	{nodefacts.PKIFile("etcd/peer.crt"), "certs etcd-peer"},
	{nodefacts.PKIFile("etcd/healthcheck-client.crt"), "certs etcd-healthcheck-client"},
}

// repairScript regenerates, over the node's etcd data, what a set-up
// control-plane node lacks (bootstrap/repair), in kubeadm init's order:
// certificates, kubeconfigs, manifests, then the kubelet's configuration
// and start. A node that lost a file or two gets those back; a blank
// machine given the cluster's restored data (homelab etcd restore, every
// control-plane disk lost) gets all of them.
func repairScript(configPath string) scripts.Script {
	a := repairArgs{Aside: nodefacts.RestoreAsideDir, Manifests: nodefacts.ManifestsDir, Config: configPath}
	a.Phases = append(a.Phases, repairCerts...)
	a.Phases = append(a.Phases,
		repairPhase{nodefacts.AdminConf, "kubeconfig admin"},
		repairPhase{nodefacts.SuperAdminConf, "kubeconfig super-admin"},
		repairPhase{nodefacts.ControllerManagerConf, "kubeconfig controller-manager"},
		repairPhase{nodefacts.SchedulerConf, "kubeconfig scheduler"},
		repairPhase{nodefacts.KubeletConf, "kubeconfig kubelet"},
		repairPhase{nodefacts.Manifest(nodefacts.Etcd), "etcd local"},
	)
	for _, c := range []string{nodefacts.KubeAPIServer, nodefacts.KubeControllerManager, nodefacts.KubeScheduler} {
		a.Phases = append(a.Phases, repairPhase{nodefacts.Manifest(c), "control-plane " + nodefacts.ComponentPhase[c]})
	}
	a.Phases = append(a.Phases, repairPhase{nodefacts.KubeletConfigFile, "kubelet-start"})
	return scripts.Render("bootstrap/repair", a)
}

// repairBootstrap repairs a set-up bootstrap node that lost files, and
// waits (bounded) for its API: the cluster it serves is the one its etcd
// data holds, never a new one.
func repairBootstrap(ctx context.Context, c ssh.Executor, node, configPath string) error {
	p.GetLogger(ctx).Warningf("%s: set up once (its completion marker is there) but missing kubeadm's files, and no other control-plane node serves the cluster: "+
		"repairing it over its etcd data (kubeadm init phase for what is missing), never a reset", node)
	out, err := mustFinish(ctx, c, node, "repairing the control plane", repairScript(configPath))
	if err != nil {
		return err
	}
	if s := strings.TrimSpace(out); s != "" {
		p.GetLogger(ctx).Infof("%s: %s", node, strings.ReplaceAll(s, "\n", "; "))
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), configOf(ctx).probes.timeout)
	defer cancel()
	readyz := scripts.Render("cluster/readyz", clusterArgs{Kubectl: kubectl})
	for {
		if _, code, err := query(wctx, c, readyz); err == nil && code == 0 {
			return nil
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("%s: repaired, but its API does not answer /readyz after %s: homelab doctor shows what is wrong; up again once it answers", node, configOf(ctx).probes.timeout)
		case <-time.After(configOf(ctx).probes.poll):
		}
	}
}

// onlyCopyRefusal is the refusal to reset a node whose etcd data no live
// member holds elsewhere.
func onlyCopyRefusal(node, step, why string) error {
	return refused(node, step, "reset a node holding etcd data that may be the cluster's only copy ("+why+"). "+
		"With consent the data is moved aside under "+nodefacts.EtcdAsideDir+", not deleted. If the node was set up, put back what is missing instead "+
		"(its manifests, admin.conf), or make it the cluster's data with homelab etcd restore --from-data "+node)
}

// ownMember is the node's member among ms (by name or peer URL), and
// whether it is the only one: its data is then the only copy.
func ownMember(ms []memberHealth, node, host string) (m memberHealth, found, only bool) {
	peerURL := "https://" + net.JoinHostPort(host, "2380")
	for _, x := range ms {
		if x.Name == node || x.PeerURL == peerURL {
			return x, true, len(ms) == 1
		}
	}
	return memberHealth{}, false, false
}

// etcdDataLine is what kubeadm/join-read prints when the node holds etcd
// data.
const etcdDataLine = "etcd-data=yes"

func joinResetRisk(node string) string {
	return "may reset control-plane node " + node + ", which kubeadm left half set up and which holds etcd data: its etcd member is removed " +
		"(a started one only with consent) and its data moved aside under " + nodefacts.EtcdAsideDir + "; without consent only where the live members hold that data"
}

// bootstrapPlan is what the bootstrap would do to its node when no
// cluster is found: reset a node holding etcd data (risk), or repair a
// set-up one (repair); "" for neither. A node that cannot be read says
// nothing.
func bootstrapPlan(ctx context.Context, conn Connection) (risk, repair string) {
	c, err := dial(ctx, conn)
	if err != nil {
		return "", ""
	}
	defer c.Close()
	state, _, err := query(ctx, c, initState())
	if err != nil || strings.TrimSpace(state) != nodefacts.StatePartial {
		return "", ""
	}
	f, err := readPartial(ctx, c)
	switch {
	case err != nil || !f.etcdData:
		return "", ""
	case f.marked:
		return "", conn.Node + " was set up and lacks kubeadm files (admin.conf or a static pod manifest): up regenerates them over its etcd data (kubeadm init phase), no reset"
	}
	return "resets " + conn.Node + ", which holds etcd data without a completion marker while no other control-plane node serves the cluster (an init that never finished?): " +
		"the data is moved aside under " + nodefacts.EtcdAsideDir + ", kept", ""
}
