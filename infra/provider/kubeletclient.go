package provider

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/nodeprobes"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// Kubelet client certificates rotate: the kubelet's certificate manager
// renews its client certificate into kubelet-client-current.pem, and
// kubelet.conf must name that file. A node whose kubelet.conf embeds its
// certificate instead (an old kubeadm init, a hand-built or adopted
// cluster: kubeadm #1317, #2185) is repaired as kubeadm's own
// `kubeadm init phase kubelet-finalize enable-client-cert-rotation` does
// it: the current context's user names the file, for certificate and
// key. The repair is the node's KubeadmJoin's: kubelet.conf is what its
// join (the TLS bootstrap) writes, and every node, control plane or
// worker, has one.
//
// kubeadm's phase itself does not fit: it is an init phase, which needs an
// InitConfiguration (a worker has none, and one made up for it would have
// to repeat its kubelet's --cert-dir), it does nothing when
// kubelet-client-current.pem is missing, and it points at the file without
// asking whether the certificate there can authenticate the node.
// rotatingKubeconfig is its rewrite, checked against it (the oracle test);
// what it lacks is done here around it.

// embeddedClient is LiveKubeletClient's value for a kubelet.conf that
// embeds its client certificate.
const embeddedClient = "embedded"

// kubeletAction is what converging a node's kubelet credentials does.
type kubeletAction int

const (
	// kubeletKeep: nothing to do, or nothing up may do.
	kubeletKeep kubeletAction = iota
	// kubeletRepoint: kubelet-client-current.pem can authenticate the
	// node; kubelet.conf is pointed at it.
	kubeletRepoint
	// kubeletStore: the file cannot, the embedded pair can: it is stored
	// as the kubelet's store keeps a pair (kubelet-client-TIME.pem, the
	// -current link to it), then kubelet.conf is pointed at it.
	kubeletStore
)

// kubeletPlan is what up makes of a node's kubelet credentials.
type kubeletPlan struct {
	action kubeletAction
	// live is the state's LiveKubeletClient: the file kubelet.conf names,
	// embeddedClient, or "" (no kubelet.conf, or no certificate in it).
	live string
	// repair says what up does and why; problem why it leaves an
	// embedded certificate as it is.
	repair, problem string
}

// pairChecks are what only a step that reads the keys can tell: whether
// each certificate goes with its key. nil when fine or not looked at (a
// Read prints no key).
type pairChecks struct{ embedded, current error }

// planKubeletClient decides from what the node has. The rotating file is
// preferred when it can authenticate the node (the kubelet itself prefers
// it over an embedded certificate); else the embedded pair is carried
// over; a kubelet.conf whose certificate neither can be is left alone,
// saying why: pointing it elsewhere would only break a kubelet that still
// runs on what it has in memory.
func planKubeletClient(k nodefacts.KubeletClient, node string, now time.Time, keys pairChecks) kubeletPlan {
	switch {
	case !k.Conf:
		return kubeletPlan{}
	case k.Err != nil:
		return kubeletPlan{problem: fmt.Sprintf("its kubelet credentials cannot be read: %v", k.Err)}
	case !k.Embeds():
		return kubeletPlan{live: k.CertFile}
	}
	embedded := fmt.Sprintf("kubelet.conf embeds its client certificate (valid until %s), which nothing rotates", stamp(k.Embedded.NotAfter))
	current := currentProblem(k, node, now, keys.current)
	if current == "" {
		return kubeletPlan{action: kubeletRepoint, live: embeddedClient, repair: fmt.Sprintf(
			"%s: up points it at %s, the kubelet's rotating one (valid until %s), and restarts the kubelet",
			embedded, nodefacts.KubeletClientCert, stamp(k.Current.NotAfter))}
	}
	own := nodefacts.KubeletCertProblem(k.Embedded, node, k.CAs, now)
	switch {
	case own == "" && !k.EmbeddedKey:
		own = "embedded without its key (client-key-data)"
	case own == "" && keys.embedded != nil:
		own = "not the pair of its client-key-data (" + keys.embedded.Error() + ")"
	}
	if own == "" {
		return kubeletPlan{action: kubeletStore, live: embeddedClient, repair: fmt.Sprintf(
			"%s, and %s is %s: up stores the embedded pair there as the kubelet's store keeps one, points kubelet.conf at it and restarts the kubelet",
			embedded, nodefacts.KubeletClientCert, current)}
	}
	return kubeletPlan{live: embeddedClient, problem: fmt.Sprintf(
		"kubelet.conf embeds a client certificate that is %s, and %s is %s: up leaves it as it is, since neither can authenticate the kubelet once it restarts; "+
			"the node needs new kubelet credentials (kubeadm's troubleshooting: kubelet client certificate rotation fails)",
		own, nodefacts.KubeletClientCert, current)}
}

// currentProblem says why kubelet-client-current.pem cannot authenticate
// the node; "" when it can.
func currentProblem(k nodefacts.KubeletClient, node string, now time.Time, pair error) string {
	switch {
	case k.Current == nil:
		return "missing"
	case pair != nil:
		return "broken (" + pair.Error() + ")"
	}
	if why := nodefacts.KubeletCertProblem(k.Current, node, k.CAs, now); why != "" {
		return "a certificate " + why
	}
	return ""
}

// rotatingKubeconfig is kubelet.conf as kubeadm's kubelet-finalize phase
// rewrites it: the current context's user names the rotating file for
// its certificate and key and embeds neither; nothing else changes.
func rotatingKubeconfig(conf []byte) ([]byte, error) {
	kc, err := clientcmd.Load(conf)
	if err != nil {
		return nil, err
	}
	cur, ok := kc.Contexts[kc.CurrentContext]
	if kc.CurrentContext == "" || !ok {
		return nil, errors.New("no current context")
	}
	info, ok := kc.AuthInfos[cur.AuthInfo]
	if cur.AuthInfo == "" || !ok {
		return nil, fmt.Errorf("context %q names no user it has", kc.CurrentContext)
	}
	info.ClientKeyData, info.ClientCertificateData = []byte{}, []byte{}
	info.ClientKey, info.ClientCertificate = nodefacts.KubeletClientCert, nodefacts.KubeletClientCert
	return clientcmd.Write(*kc)
}

// embeddedPair is the current context's user's certificate and key.
func embeddedPair(conf []byte) (certPEM, keyPEM []byte, err error) {
	kc, err := clientcmd.Load(conf)
	if err != nil {
		return nil, nil, err
	}
	cur, ok := kc.Contexts[kc.CurrentContext]
	if !ok {
		return nil, nil, errors.New("no current context")
	}
	info, ok := kc.AuthInfos[cur.AuthInfo]
	if !ok {
		return nil, nil, fmt.Errorf("context %q names no user it has", kc.CurrentContext)
	}
	return info.ClientCertificateData, info.ClientKeyData, nil
}

// joinReadArgs are kubeadm/join-read's values.
type joinReadArgs struct {
	State         nodeprobes.StateArgs
	EtcdData      nodeprobes.TraceArgs
	KubeletClient nodeprobes.KubeletClientArgs
}

// joinReadScript is the join's Read: its membership, then its kubelet's
// credentials, in one round trip.
func (j KubeadmJoinArgs) joinReadScript() scripts.Script {
	return scripts.Render("kubeadm/join-read", joinReadArgs{
		State:         j.memberState(),
		EtcdData:      nodeprobes.TraceAt("", nodefacts.Trace{Path: nodefacts.EtcdWALDir, Kind: nodefacts.Dir}),
		KubeletClient: nodeprobes.KubeletClientAt(""),
	})
}

func readKubeletClient(ctx context.Context, c ssh.Executor) (nodefacts.KubeletClient, error) {
	out, _, err := query(ctx, c, nodeprobes.KubeletClient())
	if err != nil {
		return nodefacts.KubeletClient{}, err
	}
	return nodefacts.ParseKubeletClient(out), nil
}

// setKubeletClient records a plan in the state.
func (st *KubeadmJoinState) setKubeletClient(pl kubeletPlan) {
	st.LiveKubeletClient, st.KubeletClientRepair, st.KubeletClientProblem = pl.live, pl.repair, pl.problem
}

// convergeKubeletClient repairs a kubelet.conf that embeds its client
// certificate, and returns what the node has then. It reads the node
// first, keys included (a Read prints none), and acts only when the
// credentials it points the kubelet at can authenticate the node. The
// kubelet must then renew its Lease through the API: if it does not
// within the probes' timeout, the old kubelet.conf is put back, the
// kubelet restarted on it, and the error says so. Without an API to ask,
// nothing is changed: the next up repairs it.
func convergeKubeletClient(ctx context.Context, in KubeadmJoinArgs) (kubeletPlan, error) {
	node := in.Connection.Node
	log := p.GetLogger(ctx)
	c, err := dial(ctx, in.Connection)
	if err != nil {
		return kubeletPlan{}, err
	}
	defer c.Close()
	k, err := readKubeletClient(ctx, c)
	if err != nil {
		return kubeletPlan{}, err
	}
	now := time.Now()
	plan := planKubeletClient(k, node, now, pairChecks{})
	if plan.action == kubeletKeep {
		if plan.problem != "" {
			log.Warningf("%s: %s", node, plan.problem)
		}
		return plan, nil
	}
	conf, err := c.Read(ctx, kubeletConf)
	if err != nil {
		return plan, fmt.Errorf("%s: reading %s: %w", node, kubeletConf, err)
	}
	certPEM, keyPEM, err := embeddedPair(conf)
	if err != nil {
		return plan, fmt.Errorf("%s: %s: %w", node, kubeletConf, err)
	}
	var keys pairChecks
	_, keys.embedded = tls.X509KeyPair(certPEM, keyPEM)
	if k.Current != nil {
		if pair, err := c.Read(ctx, nodefacts.KubeletClientCert); err != nil {
			keys.current = err
		} else {
			_, keys.current = tls.X509KeyPair(pair, pair)
		}
	}
	if plan = planKubeletClient(k, node, now, keys); plan.action == kubeletKeep {
		log.Warningf("%s: %s", node, plan.problem)
		return plan, nil
	}
	rotating, err := rotatingKubeconfig(conf)
	if err != nil {
		return plan, fmt.Errorf("%s: %s: %w", node, kubeletConf, err)
	}
	cl, clNode, err := clusterClient(ctx, in.Via, in.Peers)
	if err != nil {
		log.Warningf("%s: %s; not repaired by this up, as nothing could confirm its kubelet still reaches the API afterwards (%v): the next up repairs it", node, plan.repair, err)
		return plan, nil
	}
	defer cl.Close()
	log.Infof("%s: %s", node, plan.repair)
	// Once begun, the repair runs to its end (or its undoing) whatever
	// the user presses: a kubelet.conf half done is a node cut off.
	ctx = context.WithoutCancel(ctx)
	if plan.action == kubeletStore {
		pair := nodefacts.KubeletClientPair(time.Now())
		if err := c.Upload(ctx, pair, nodefacts.PairPEM(certPEM, keyPEM), 0o600); err != nil {
			return plan, fmt.Errorf("%s: storing the kubelet's client certificate: %w", node, err)
		}
		if _, err := mustFinish(ctx, c, node, "linking "+nodefacts.KubeletClientCert, linkClientPair(pair)); err != nil {
			return plan, err
		}
	}
	if err := c.Upload(ctx, kubeletConf, rotating, 0o600); err != nil {
		return plan, fmt.Errorf("%s: writing %s: %w", node, kubeletConf, err)
	}
	if err := restartKubelet(ctx, c, cl, clNode, node); err != nil {
		if rerr := c.Upload(ctx, kubeletConf, conf, 0o600); rerr != nil {
			return plan, fmt.Errorf("%s: %w; putting the embedded kubelet.conf back failed too: %v", node, err, rerr)
		}
		if _, rerr := mustFinish(ctx, c, node, "restarting the kubelet on its embedded kubelet.conf", unitScript("restart", "kubelet")); rerr != nil {
			return plan, fmt.Errorf("%s: %w; kubelet.conf is the embedded one again, but restarting the kubelet on it failed: %v", node, err, rerr)
		}
		return plan, fmt.Errorf("%s: %w: its kubelet.conf is the embedded one again, and the kubelet restarted on it", node, err)
	}
	after, err := readKubeletClient(ctx, c)
	if err != nil {
		return plan, err
	}
	done := planKubeletClient(after, node, time.Now(), pairChecks{})
	if done.live != nodefacts.KubeletClientCert {
		return done, fmt.Errorf("%s: kubelet.conf still does not name %s after the repair (it names %q)", node, nodefacts.KubeletClientCert, done.live)
	}
	return done, nil
}

type clientLinkArgs struct{ Pair, Link, Current string }

// linkClientPair makes pair, stored in the kubelet's certificate
// directory, its current client certificate.
func linkClientPair(pair string) scripts.Script {
	return scripts.Render("kubelet/client-link", clientLinkArgs{Pair: pair, Link: nodefacts.KubeletPKIDir + "/.kubelet-client-current.homelab", Current: nodefacts.KubeletClientCert})
}

// restartKubelet restarts the node's kubelet and waits until it has
// renewed its Lease after the restart, which it can only do with working
// credentials, and its Node reports Ready. cl is a control-plane node
// whose admin.conf the API answers to.
func restartKubelet(ctx context.Context, c, cl ssh.Executor, clNode, node string) error {
	if _, err := mustFinish(ctx, c, node, "restarting the kubelet", unitScript("restart", "kubelet")); err != nil {
		return err
	}
	pr := configOf(ctx).probes
	deadline := time.Now().Add(pr.timeout)
	// Read once the old kubelet is gone: any later renewal is the new one's.
	before, _, err := readLease(ctx, cl, clNode, node)
	known := err == nil
	var last error
	for {
		renewed, _, err := readLease(ctx, cl, clNode, node)
		switch {
		case err != nil:
			last = err
		case !known:
			before, known = renewed, true
			last = fmt.Errorf("its kubelet did not renew its Lease (kube-node-lease/%s) since its restart", node)
		case renewed == "" || renewed == before:
			last = fmt.Errorf("its kubelet did not renew its Lease (kube-node-lease/%s) since its restart", node)
		default:
			ready, err := nodeReady(ctx, cl, node)
			if err == nil && ready {
				return nil
			}
			last = fmt.Errorf("Node %s is not Ready", node)
			if err != nil {
				last = fmt.Errorf("%s: %w", clNode, err)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%v within %s", last, pr.timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pr.poll):
		}
	}
}
