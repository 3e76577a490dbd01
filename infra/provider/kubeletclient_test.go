package provider

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/shell"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/infra/tools/toolstest"
	"github.com/homelab-dev/homelab/roles/nodefacts"
	"github.com/homelab-dev/homelab/roles/pki/pkitest"
)

// kubeletCA issues kubelet client certificates as the cluster's signer
// (the controller-manager, from ca.crt) does.
type kubeletCA struct {
	*pkitest.CA
	t testing.TB
}

func newKubeletCA(t *testing.T) *kubeletCA {
	t.Helper()
	return &kubeletCA{pkitest.NewCA(t, "kubernetes"), t}
}

// pair is a client certificate for node, valid until notAfter, and its key.
func (ca *kubeletCA) pair(node string, notAfter time.Time) (certPEM, keyPEM []byte) {
	return ca.Issue(ca.t, pkitest.Leaf{CN: "system:node:" + node, Orgs: []string{"system:nodes"}, NotAfter: notAfter,
		Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
}

// kubeletKubeconfig is kubelet.conf as kubeadm writes it, its user auth.
func kubeletKubeconfig(t *testing.T, node string, caPEM []byte, auth *clientcmdapi.AuthInfo) []byte {
	t.Helper()
	user := "system:node:" + node
	data, err := clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"kubernetes": {Server: "https://10.0.0.100:6443", CertificateAuthorityData: caPEM}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{user: auth},
		Contexts:       map[string]*clientcmdapi.Context{user + "@kubernetes": {Cluster: "kubernetes", AuthInfo: user}},
		CurrentContext: user + "@kubernetes",
	})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func embeddedConf(t *testing.T, node string, caPEM, certPEM, keyPEM []byte) []byte {
	return kubeletKubeconfig(t, node, caPEM, &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM})
}

func TestPlanKubeletClient(t *testing.T) {
	ca, other := newKubeletCA(t), newKubeletCA(t)
	now := time.Now()
	cert := func(ca *kubeletCA, node string, notAfter time.Time) *x509.Certificate {
		c, _ := ca.pair(node, notAfter)
		parsed, err := nodefacts.ParseCertPEM(c)
		if err != nil {
			t.Fatal(err)
		}
		return parsed
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	valid, expired := now.Add(200*24*time.Hour), now.Add(-time.Hour)
	embedded := func(c *x509.Certificate, current *x509.Certificate) nodefacts.KubeletClient {
		return nodefacts.KubeletClient{Conf: true, User: "system:node:gpu-1", Embedded: c, EmbeddedKey: true, Current: current, CAs: pool}
	}
	withoutKey := embedded(cert(ca, "gpu-1", valid), nil)
	withoutKey.EmbeddedKey = false
	broken := errors.New("tls: private key does not match public key")
	for _, tc := range []struct {
		name    string
		k       nodefacts.KubeletClient
		keys    pairChecks
		action  kubeletAction
		live    string
		says    string // a word of the repair or the problem; "" for neither
		problem bool
	}{
		{"no kubelet.conf (not joined)", nodefacts.KubeletClient{CAs: pool}, pairChecks{}, kubeletKeep, "", "", false},
		{"the rotating file", nodefacts.KubeletClient{Conf: true, CertFile: nodefacts.KubeletClientCert, KeyFile: nodefacts.KubeletClientCert, CAs: pool}, pairChecks{}, kubeletKeep, nodefacts.KubeletClientCert, "", false},
		{"another file (not up's to change)", nodefacts.KubeletClient{Conf: true, CertFile: "/etc/kubernetes/pki/kubelet.crt", CAs: pool}, pairChecks{}, kubeletKeep, "/etc/kubernetes/pki/kubelet.crt", "", false},
		{"kubelet.conf unreadable", nodefacts.KubeletClient{Conf: true, Err: errors.New("no current-context"), CAs: pool}, pairChecks{}, kubeletKeep, "", "no current-context", true},
		{"embedded, the file serves", embedded(cert(ca, "gpu-1", valid), cert(ca, "gpu-1", valid)), pairChecks{}, kubeletRepoint, embeddedClient, "points it at", false},
		{"embedded expired, the file serves", embedded(cert(ca, "gpu-1", expired), cert(ca, "gpu-1", valid)), pairChecks{}, kubeletRepoint, embeddedClient, "points it at", false},
		{"embedded, no file", embedded(cert(ca, "gpu-1", valid), nil), pairChecks{}, kubeletStore, embeddedClient, "is missing", false},
		{"embedded, the file expired", embedded(cert(ca, "gpu-1", valid), cert(ca, "gpu-1", expired)), pairChecks{}, kubeletStore, embeddedClient, "expired", false},
		{"embedded, the file another node's", embedded(cert(ca, "gpu-1", valid), cert(ca, "gpu-2", valid)), pairChecks{}, kubeletStore, embeddedClient, "system:node:gpu-2", false},
		{"embedded, the file's pair broken", embedded(cert(ca, "gpu-1", valid), cert(ca, "gpu-1", valid)), pairChecks{current: broken}, kubeletStore, embeddedClient, "broken", false},
		{"embedded expired, no file", embedded(cert(ca, "gpu-1", expired), nil), pairChecks{}, kubeletKeep, embeddedClient, "expired", true},
		{"embedded another CA's, no file", embedded(cert(other, "gpu-1", valid), nil), pairChecks{}, kubeletKeep, embeddedClient, "cluster CA", true},
		{"embedded another node's, no file", embedded(cert(ca, "gpu-2", valid), nil), pairChecks{}, kubeletKeep, embeddedClient, "system:node:gpu-2", true},
		{"embedded without its key, no file", withoutKey, pairChecks{}, kubeletKeep, embeddedClient, "without its key", true},
		{"embedded with another key, no file", embedded(cert(ca, "gpu-1", valid), nil), pairChecks{embedded: broken}, kubeletKeep, embeddedClient, "not the pair", true},
	} {
		pl := planKubeletClient(tc.k, "gpu-1", now, tc.keys)
		said := pl.repair
		if tc.problem {
			said = pl.problem
		}
		if pl.action != tc.action || pl.live != tc.live || !strings.Contains(said, tc.says) || (tc.says == "") != (pl.repair == "" && pl.problem == "") ||
			(pl.action == kubeletKeep) != (pl.repair == "") {
			t.Errorf("%s: %+v, want action %d live %q saying %q", tc.name, pl, tc.action, tc.live, tc.says)
		}
	}
}

// rotatingKubeconfig rewrites kubelet.conf exactly as kubeadm's
// kubelet-finalize phase does: the real kubeadm, run on a copy of a node's
// tree (--rootfs chroots into it, without a network), is the oracle.
func TestRotatingKubeconfigIsKubeadms(t *testing.T) {
	kubeadmBin := toolstest.Require(t, "kubeadm")
	if os.Geteuid() != 0 {
		toolstest.Missing(t, "kubeadm --rootfs chroots: needs root")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		toolstest.Missing(t, err.Error())
	}
	ca := newKubeletCA(t)
	certPEM, keyPEM := ca.pair("gpu-1", time.Now().Add(24*time.Hour))
	conf := embeddedConf(t, "gpu-1", ca.PEM, certPEM, keyPEM)
	root := t.TempDir()
	write := func(p string, data []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(root+p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(root+p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(nodefacts.KubeletConf, conf)
	pair := nodefacts.KubeletClientPair(time.Now())
	write(pair, nodefacts.PairPEM(certPEM, keyPEM))
	if err := os.Symlink(pair, root+nodefacts.KubeletClientCert); err != nil {
		t.Fatal(err)
	}
	// An init phase wants an InitConfiguration; nothing of it but the
	// kubelet's --cert-dir (none here: the default) matters to this one.
	write("/init.yaml", []byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nlocalAPIEndpoint: {advertiseAddress: 10.0.0.21}\nnodeRegistration: {name: gpu-1}\n"+
		"---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.34.4\n"))
	out, err := exec.Command(unshare, "--net", "--", kubeadmBin, "init", "phase", "kubelet-finalize", "enable-client-cert-rotation", "--rootfs", root, "--config", "/init.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("kubeadm: %v\n%s", err, out)
	}
	byKubeadm, err := os.ReadFile(root + nodefacts.KubeletConf)
	if err != nil {
		t.Fatal(err)
	}
	if string(byKubeadm) == string(conf) {
		t.Fatalf("kubeadm left kubelet.conf as it was:\n%s", out)
	}
	ours, err := rotatingKubeconfig(conf)
	if err != nil {
		t.Fatal(err)
	}
	want, err := clientcmd.Load(byKubeadm)
	if err != nil {
		t.Fatal(err)
	}
	got, err := clientcmd.Load(ours)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ours:\n%s\nkubeadm's:\n%s", ours, byKubeadm)
	}
	if k := nodefacts.ParseKubeletClient("kubelet-conf=" + base64.StdEncoding.EncodeToString(ours)); k.Embeds() || k.CertFile != nodefacts.KubeletClientCert || k.KeyFile != nodefacts.KubeletClientCert {
		t.Errorf("the probe reads the result as %+v", k)
	}
}

// kubeletNode is a fake node with a kubelet whose credentials the API
// accepts when kubelet.conf names them usable (a pair file that is there,
// or an embedded pair): after each restart it renews its Lease, as its
// control-plane node's kubectl reports, only then.
type kubeletNode struct {
	lab      *fakeLab
	n, via   *fakeNode
	ca       *kubeletCA
	ctx      context.Context
	in       KubeadmJoinArgs
	renewals int
	// dead: the kubelet renews nothing, whatever its credentials.
	dead bool
}

var keyData = regexp.MustCompile(`(client-key-data:\s*)\S+`)

func newKubeletNode(t *testing.T, name string, controlPlane bool) *kubeletNode {
	lab := newFakeLab(t)
	k := &kubeletNode{lab: lab, n: lab.node(name), via: lab.node("cp-1"), ca: newKubeletCA(t)}
	k.in = KubeadmJoinArgs{Connection: lab.conn(name), Via: lab.conn("cp-1"), ControlPlane: controlPlane, ConfigPath: "/etc/kubernetes/kubeadm/join.yaml", ConfigSha: "a"}
	k.ctx = withProbes(lab.ctx(), probes{poll: time.Millisecond, timeout: 300 * time.Millisecond})
	k.n.put(nodefacts.CACert, string(k.ca.PEM), 0o644)
	// nodefacts/kubeletclient, from the node's files: kubelet.conf without
	// its keys, the rotating file's certificate, the CA. The join's Read
	// (kubeadm/join-read) asks its membership first.
	answer := func(cmd string) (ssh.Result, error) {
		var b strings.Builder
		if name, _ := scripts.NameOf(cmd); name == "kubeadm/join-read" {
			b.WriteString(nodefacts.StateSetUp + "\n")
		}
		lines := func(key string, data []byte) {
			for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
				fmt.Fprintf(&b, "%s=%s\n", key, l)
			}
		}
		if f, ok := k.n.files[nodefacts.KubeletConf]; ok {
			if keyData.Match(f.content) {
				fmt.Fprintf(&b, "kubelet-conf=%s\n", base64.StdEncoding.EncodeToString(keyData.ReplaceAll(f.content, []byte(`${1}cmVkYWN0ZWQ=`))))
			} else {
				b.WriteString("kubelet-conf-file=yes\n")
				lines("kubelet-conf-line", f.content)
			}
		}
		if f, ok := k.n.files[nodefacts.KubeletClientCert]; ok {
			if c, err := nodefacts.ParseCertPEM(f.content); err == nil {
				lines("kubelet-current-line", pemOf(c.Raw))
			}
		}
		lines("kubelet-ca-line", k.ca.PEM)
		return ssh.Result{Stdout: []byte(b.String())}, nil
	}
	k.n.onScriptFunc("nodefacts/kubeletclient", answer)
	k.n.onScriptFunc("kubeadm/join-read", answer)
	k.n.onScriptFunc("systemd/restart", func(cmd string) (ssh.Result, error) {
		if !strings.HasSuffix(cmd, "systemctl restart 'kubelet'\n") {
			t.Errorf("restarted another unit than the kubelet: %q", cmd)
			return ssh.Result{ExitCode: 5}, nil
		}
		return ssh.Result{}, nil
	})
	k.n.onScriptFunc("kubelet/client-link", func(cmd string) (ssh.Result, error) {
		for _, line := range strings.Split(cmd, "\n") {
			if f := strings.Fields(line); len(f) == 4 && f[0] == "ln" && f[1] == "-sfn" {
				k.n.files[nodefacts.KubeletClientCert] = k.n.files[strings.Trim(f[2], "'")]
				return ssh.Result{}, nil
			}
		}
		t.Errorf("no link in %q", cmd)
		return ssh.Result{ExitCode: 1}, nil
	})
	k.via.onScript("cluster/readyz", "", 0)
	k.via.onScriptWithFunc("rejoin/lease", shell.Quote(name), func(string) (ssh.Result, error) {
		if k.works() {
			k.renewals++
		}
		return ssh.Result{Stdout: []byte(fmt.Sprintf("2027-01-01T00:00:%02d.000000Z 40", k.renewals))}, nil
	})
	k.via.onScript("cluster/node-ready", "True", 0)
	return k
}

// works reports whether the kubelet can authenticate with what
// kubelet.conf names now.
func (k *kubeletNode) works() bool {
	if k.dead {
		return false
	}
	kc, err := clientcmd.Load(k.n.files[nodefacts.KubeletConf].content)
	if err != nil {
		return false
	}
	auth := kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo]
	certPEM, keyPEM := auth.ClientCertificateData, auth.ClientKeyData
	if auth.ClientCertificate != "" {
		f, ok := k.n.files[auth.ClientCertificate]
		if !ok {
			return false
		}
		certPEM, keyPEM = f.content, f.content
	}
	_, err = tls.X509KeyPair(certPEM, keyPEM)
	return err == nil
}

// embed gives the node a kubelet.conf embedding a pair valid until
// notAfter, and, when current is not nil, the rotating file holding it.
func (k *kubeletNode) embed(t *testing.T, notAfter time.Time, current []byte) (certPEM, keyPEM []byte) {
	certPEM, keyPEM = k.ca.pair(k.n.name, notAfter)
	k.n.put(nodefacts.KubeletConf, string(embeddedConf(t, k.n.name, k.ca.PEM, certPEM, keyPEM)), 0o600)
	if current != nil {
		k.n.put(nodefacts.KubeletClientCert, string(current), 0o600)
	}
	return certPEM, keyPEM
}

func (k *kubeletNode) refreshed(t *testing.T) KubeadmJoinState {
	t.Helper()
	st := refresh(t, k.ctx, KubeadmJoin{}, k.in, KubeadmJoinState{KubeadmJoinArgs: k.in, Joined: true})
	k.n.reset()
	k.via.reset()
	return st
}

func (k *kubeletNode) update(st KubeadmJoinState) (KubeadmJoinState, error) {
	resp, err := KubeadmJoin{}.Update(k.ctx, infer.UpdateRequest[KubeadmJoinArgs, KubeadmJoinState]{ID: k.n.name, Inputs: k.in, State: st})
	return resp.Output, err
}

// names reports what kubelet.conf's user authenticates with now.
func (k *kubeletNode) names(t *testing.T) *clientcmdapi.AuthInfo {
	t.Helper()
	kc, err := clientcmd.Load(k.n.files[nodefacts.KubeletConf].content)
	if err != nil {
		t.Fatal(err)
	}
	if kc.Clusters["kubernetes"].Server != "https://10.0.0.100:6443" || string(kc.Clusters["kubernetes"].CertificateAuthorityData) != string(k.ca.PEM) {
		t.Errorf("kubelet.conf's cluster changed: %+v", kc.Clusters)
	}
	return kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo]
}

// restartedKubelet is the kubelet's restart among scriptSteps.
const restartedKubelet = "systemd/restart: systemctl restart 'kubelet'"

func uploads(m []string) []string {
	var out []string
	for _, c := range m {
		if p, ok := strings.CutPrefix(c, "upload "); ok {
			out = append(out, p)
		}
	}
	return out
}

// A worker whose kubelet.conf embeds its certificate while the kubelet
// rotates kubelet-client-current.pem: preview names the repair, up points
// kubelet.conf at the file, restarts the kubelet and waits for its Lease;
// the next refresh finds nothing to do, and up does nothing.
func TestEmbeddedKubeletConfRepointed(t *testing.T) {
	k := newKubeletNode(t, "gpu-1", false)
	certPEM, keyPEM := k.ca.pair("gpu-1", time.Now().Add(300*24*time.Hour))
	k.embed(t, time.Now().Add(100*24*time.Hour), nodefacts.PairPEM(certPEM, keyPEM))
	st := k.refreshed(t)
	if keys := diffKeys(t, KubeadmJoin{}, k.in, st); !slices.Equal(keys, []string{"liveKubeletClient"}) {
		t.Errorf("preview shows %v", keys)
	}
	if st.LiveKubeletClient != embeddedClient || !strings.Contains(st.KubeletClientRepair, "points it at "+nodefacts.KubeletClientCert) || st.KubeletClientProblem != "" {
		t.Errorf("state %q, repair %q, problem %q", st.LiveKubeletClient, st.KubeletClientRepair, st.KubeletClientProblem)
	}
	if strings.Contains(fmt.Sprint(st), string(keyPEM)) {
		t.Error("the state holds a key")
	}
	out, err := k.update(st)
	if err != nil {
		t.Fatal(err)
	}
	m := scriptSteps(k.n)
	if len(m) != 2 || m[0] != "upload "+nodefacts.KubeletConf || m[1] != restartedKubelet {
		t.Errorf("ran %q, want kubelet.conf written, then the kubelet restarted", m)
	}
	if auth := k.names(t); auth.ClientCertificate != nodefacts.KubeletClientCert || auth.ClientKey != nodefacts.KubeletClientCert || len(auth.ClientCertificateData)+len(auth.ClientKeyData) > 0 {
		t.Errorf("kubelet.conf's user: %+v", auth)
	}
	if f := k.n.files[nodefacts.KubeletConf]; f.mode != 0o600 {
		t.Errorf("kubelet.conf mode %o", f.mode)
	}
	if k.renewals < 2 || !k.via.asked("get node 'gpu-1'") {
		t.Errorf("the kubelet renewed %d times before up went on; Node asked for: %v", k.renewals, k.via.asked("get node"))
	}
	if out.LiveKubeletClient != nodefacts.KubeletClientCert || out.KubeletClientRepair != "" {
		t.Errorf("state after: %q %q", out.LiveKubeletClient, out.KubeletClientRepair)
	}
	st = k.refreshed(t)
	if keys := diffKeys(t, KubeadmJoin{}, k.in, st); len(keys) > 0 {
		t.Errorf("preview after the repair shows %v", keys)
	}
	if _, err := k.update(st); err != nil || len(k.n.mutations()) > 0 || len(k.via.events) > 0 {
		t.Errorf("up after the repair: %v, ran %v, asked %s %v", err, k.n.mutations(), k.via.name, k.via.events)
	}
}

// A control-plane node whose kubelet.conf embeds its certificate and
// which has no kubelet-client-current.pem: the embedded pair is stored as
// the kubelet's store keeps one, linked, and kubelet.conf pointed at it.
func TestEmbeddedPairStored(t *testing.T) {
	k := newKubeletNode(t, "cp-2", true)
	certPEM, keyPEM := k.embed(t, time.Now().Add(100*24*time.Hour), nil)
	st := k.refreshed(t)
	if !strings.Contains(st.KubeletClientRepair, "is missing: up stores the embedded pair") {
		t.Errorf("repair %q", st.KubeletClientRepair)
	}
	if _, err := k.update(st); err != nil {
		t.Fatal(err)
	}
	m := scriptSteps(k.n)
	up := uploads(m)
	if len(m) != 4 || len(up) != 2 || !strings.HasPrefix(up[0], nodefacts.KubeletPKIDir+"/kubelet-client-") || !strings.HasPrefix(m[1], "kubelet/client-link: ") || up[1] != nodefacts.KubeletConf || m[3] != restartedKubelet {
		t.Fatalf("ran %q, want the pair stored and linked, kubelet.conf written, the kubelet restarted", m)
	}
	if pair := k.n.files[up[0]]; string(pair.content) != string(certPEM)+string(keyPEM) || pair.mode != 0o600 {
		t.Errorf("stored %o %q", pair.mode, pair.content)
	}
	if string(k.n.files[nodefacts.KubeletClientCert].content) != string(certPEM)+string(keyPEM) {
		t.Error("kubelet-client-current.pem is not the stored pair")
	}
	if auth := k.names(t); auth.ClientCertificate != nodefacts.KubeletClientCert || len(auth.ClientKeyData) > 0 {
		t.Errorf("kubelet.conf's user: %+v", auth)
	}
}

// An embedded certificate neither it nor the rotating file can replace
// (expired, another cluster's, another node's, without its key): preview
// shows no change and says why, and up writes nothing on the node.
func TestUnusableEmbeddedCertificateLeft(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, k *kubeletNode)
		says  string
	}{
		{"expired, no file", func(t *testing.T, k *kubeletNode) { k.embed(t, time.Now().Add(-time.Hour), nil) }, "expired"},
		{"expired, the file too", func(t *testing.T, k *kubeletNode) {
			c, key := k.ca.pair("gpu-1", time.Now().Add(-2*time.Hour))
			k.embed(t, time.Now().Add(-time.Hour), nodefacts.PairPEM(c, key))
		}, "a certificate expired"},
		{"another cluster's", func(t *testing.T, k *kubeletNode) {
			other := newKubeletCA(t)
			c, key := other.pair("gpu-1", time.Now().Add(24*time.Hour))
			k.n.put(nodefacts.KubeletConf, string(embeddedConf(t, "gpu-1", k.ca.PEM, c, key)), 0o600)
		}, "cluster CA"},
		{"another node's", func(t *testing.T, k *kubeletNode) {
			c, key := k.ca.pair("gpu-2", time.Now().Add(24*time.Hour))
			k.n.put(nodefacts.KubeletConf, string(embeddedConf(t, "gpu-1", k.ca.PEM, c, key)), 0o600)
		}, "system:node:gpu-2"},
		{"a key that is not its own", func(t *testing.T, k *kubeletNode) {
			c, _ := k.ca.pair("gpu-1", time.Now().Add(24*time.Hour))
			_, key := k.ca.pair("gpu-1", time.Now().Add(24*time.Hour))
			k.n.put(nodefacts.KubeletConf, string(embeddedConf(t, "gpu-1", k.ca.PEM, c, key)), 0o600)
		}, "not the pair"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKubeletNode(t, "gpu-1", false)
			tc.setup(t, k)
			before := k.n.files[nodefacts.KubeletConf]
			st := k.refreshed(t)
			if st.LiveKubeletClient != embeddedClient {
				t.Errorf("read %q", st.LiveKubeletClient)
			}
			// A problem only a key shows is found by the step, which reads them.
			if tc.says != "not the pair" {
				if keys := diffKeys(t, KubeadmJoin{}, k.in, st); len(keys) > 0 || !strings.Contains(st.KubeletClientProblem, tc.says) || st.KubeletClientRepair != "" {
					t.Errorf("preview shows %v; problem %q, repair %q", keys, st.KubeletClientProblem, st.KubeletClientRepair)
				}
			}
			out, err := k.update(st)
			if err != nil {
				t.Fatal(err)
			}
			if m := k.n.mutations(); len(m) > 0 || string(k.n.files[nodefacts.KubeletConf].content) != string(before.content) {
				t.Errorf("ran %v on a node whose credentials it cannot carry over", m)
			}
			if !strings.Contains(out.KubeletClientProblem, tc.says) || out.KubeletClientRepair != "" {
				t.Errorf("after up: problem %q, repair %q", out.KubeletClientProblem, out.KubeletClientRepair)
			}
		})
	}
}

// A kubelet that does not renew its Lease after the repair gets its
// embedded kubelet.conf back, and is restarted on it; up fails, saying so.
func TestKubeletRepairUndone(t *testing.T) {
	k := newKubeletNode(t, "gpu-1", false)
	certPEM, keyPEM := k.ca.pair("gpu-1", time.Now().Add(300*24*time.Hour))
	k.embed(t, time.Now().Add(100*24*time.Hour), nodefacts.PairPEM(certPEM, keyPEM))
	before := k.n.files[nodefacts.KubeletConf]
	st := k.refreshed(t)
	k.dead = true
	_, err := k.update(st)
	if err == nil || !strings.Contains(err.Error(), "Lease") || !strings.Contains(err.Error(), "embedded one again") {
		t.Errorf("error %v", err)
	}
	m := scriptSteps(k.n)
	want := []string{"upload " + nodefacts.KubeletConf, restartedKubelet, "upload " + nodefacts.KubeletConf, restartedKubelet}
	if !slices.Equal(m, want) {
		t.Errorf("ran %q, want %q", m, want)
	}
	if string(k.n.files[nodefacts.KubeletConf].content) != string(before.content) {
		t.Error("kubelet.conf is not the embedded one again")
	}
}

// Without an API to confirm the kubelet still reaches it, nothing is
// changed: the state keeps the repair for the next up.
func TestKubeletRepairWaitsForTheAPI(t *testing.T) {
	k := newKubeletNode(t, "gpu-1", false)
	certPEM, keyPEM := k.ca.pair("gpu-1", time.Now().Add(300*24*time.Hour))
	k.embed(t, time.Now().Add(100*24*time.Hour), nodefacts.PairPEM(certPEM, keyPEM))
	st := k.refreshed(t)
	k.via.onScript("cluster/readyz", "", 1)
	out, err := k.update(st)
	if err != nil {
		t.Fatal(err)
	}
	if m := k.n.mutations(); len(m) > 0 {
		t.Errorf("ran %v without an API", m)
	}
	if out.LiveKubeletClient != embeddedClient || out.KubeletClientRepair == "" {
		t.Errorf("state after: %q %q", out.LiveKubeletClient, out.KubeletClientRepair)
	}
}
