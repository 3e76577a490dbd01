package stack

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/roles/nodefacts"
	"github.com/homelab-dev/homelab/roles/pki"
)

// checkKubeletClientRepair is issue 15's "a node whose kubelet.conf
// embeds its client certificate: up repairs it to the rotating file", on a
// built cluster whose last up was a no-op. On gpu-1 and cp-2 kubelet.conf
// is made to embed the kubelet's current pair (gpu-1's a short-lived one
// the test issues, so that its rotation shows within the test; cp-2's
// rotating file then removed, so up must store the embedded pair first)
// and the kubelet restarted on it: the nodes stay Ready. A refreshing
// preview shows both joins as repairs and nothing else; up points
// kubelet.conf at kubelet-client-current.pem with commands on those two
// nodes only, the kubelets renew their Leases and the Nodes stay Ready,
// gpu-1's kubelet rotates its certificate into the file and works on after
// a restart, and the next up is a no-op.
func (e *e2e) checkKubeletClientRepair(ctx context.Context, s *Stack) {
	t := e.t
	t.Helper()
	// gpu-1: a pair valid for 4 minutes, which the kubelet rotates 2.8 to
	// 3.6 minutes after it was issued (70-90% of its lifetime).
	certPEM, keyPEM, err := pki.ClientCert(s.Bundle.Talos.Certs.K8s.Crt, s.Bundle.Talos.Certs.K8s.Key, "system:node:gpu-1", "system:nodes", 4*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	short := nodefacts.KubeletClientPair(time.Now())
	e.writeNodeFile(ctx, "gpu-1", short, nodefacts.PairPEM(certPEM, keyPEM))
	e.node(ctx, "gpu-1", "ln -sfn "+short+" "+nodefacts.KubeletClientCert)
	shortSerial := e.kubeletCert(ctx, "gpu-1").SerialNumber.String()
	var keys []string
	for _, n := range []string{"gpu-1", "cp-2"} {
		keys = append(keys, keyBody(string(keyOf(e.embedKubeletPair(ctx, n))))...)
		e.restartKubelet(ctx, n)
		if out := e.node(ctx, n, "grep -c 'client-certificate-data:' "+nodefacts.KubeletConf+" || true"); strings.TrimSpace(out) != "1" {
			t.Fatalf("%s: kubelet.conf does not embed its certificate:\n%s", n, out)
		}
	}
	// cp-2's kubelet runs on the pair it loaded; the file goes.
	e.node(ctx, "cp-2", "rm -f "+nodefacts.KubeletClientCert)

	e.mutating()
	changes, err := s.PreviewChanges(ctx, true)
	if err != nil {
		t.Fatalf("preview: %v", err)
	}
	var listed []string
	for _, c := range changes {
		listed = append(listed, c.String())
	}
	t.Logf("preview:\n  %s", strings.Join(listed, "\n  "))
	if len(changes) != 2 {
		t.Errorf("preview lists %d changes, want the two joins", len(changes))
	}
	for _, c := range changes {
		want := map[string]string{"gpu-1": "up points it at " + nodefacts.KubeletClientCert, "cp-2": "is missing: up stores the embedded pair"}[c.Name]
		if c.Op != "update" || c.Type != "homelab:index:KubeadmJoin" || want == "" || !strings.Contains(c.Repairs, want) {
			t.Errorf("preview: %s, want an update of gpu-1's or cp-2's join repairing kubelet.conf (%q)", c, want)
		}
	}
	if m := e.mutating(); len(m) > 0 {
		t.Errorf("preview ran mutating commands: %v", m)
	}

	e.up(ctx, s)
	// The keys the repair read stay on the nodes: not in the state, the
	// engine's output or the command log.
	e.checkAbsent(keys...)
	ran := map[string]string{}
	for _, m := range e.mutating() {
		node, cmd, _ := strings.Cut(m, ": ")
		if node != "gpu-1" && node != "cp-2" {
			t.Errorf("the repair ran %s", m)
		}
		ran[node] += cmd + "\n"
	}
	for _, n := range []string{"gpu-1", "cp-2"} {
		if !strings.Contains(ran[n], "upload "+nodefacts.KubeletConf) || !strings.Contains(ran[n], scripts.HeaderPrefix+"systemd/restart\n") || !strings.Contains(ran[n], "systemctl restart 'kubelet'") {
			t.Errorf("%s: up ran\n%s", n, ran[n])
		}
		e.checkRotatingKubeconfig(ctx, n)
		e.waitKubelet(ctx, n, e.leaseRenewTime(ctx, n))
	}
	if !strings.Contains(ran["cp-2"], "upload "+nodefacts.KubeletPKIDir+"/kubelet-client-") {
		t.Errorf("cp-2: the embedded pair was not stored:\n%s", ran["cp-2"])
	}
	if c := e.kubeletCert(ctx, "cp-2"); c.Subject.CommonName != "system:node:cp-2" {
		t.Errorf("cp-2: kubelet-client-current.pem holds %s", c.Subject.CommonName)
	}

	// gpu-1's kubelet rotates its short-lived certificate into the file
	// kubelet.conf names now, and runs on it after a restart.
	deadline := time.Now().Add(5 * time.Minute)
	for {
		c := e.kubeletCert(ctx, "gpu-1")
		if c.SerialNumber.String() != shortSerial {
			if left := time.Until(c.NotAfter); left < 24*time.Hour {
				t.Errorf("gpu-1: rotated to a certificate valid for %s only", left.Round(time.Second))
			}
			t.Logf("figures: gpu-1's kubelet rotated its client certificate at %s", time.Now().Format(time.RFC3339))
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("gpu-1: the kubelet did not rotate its client certificate")
		}
		time.Sleep(10 * time.Second)
	}
	e.restartKubelet(ctx, "gpu-1")
	e.checkRotatingKubeconfig(ctx, "gpu-1")

	e.checkNoOp(ctx, s, "after the repair")
}

// writeNodeFile writes data to path on node, mode 0600.
func (e *e2e) writeNodeFile(ctx context.Context, node, path string, data []byte) {
	e.t.Helper()
	e.node(ctx, node, "umask 077 && mkdir -p \"$(dirname "+path+")\" && echo "+base64.StdEncoding.EncodeToString(data)+" | base64 -d > "+path+".tmp && mv -f "+path+".tmp "+path)
}

// embedKubeletPair rewrites node's kubelet.conf to embed the pair its
// kubelet-client-current.pem holds, as an old kubeadm init left it, and
// returns the pair.
func (e *e2e) embedKubeletPair(ctx context.Context, node string) []byte {
	e.t.Helper()
	pair := []byte(e.node(ctx, node, "cat "+nodefacts.KubeletClientCert))
	kc, err := clientcmd.Load([]byte(e.node(ctx, node, "cat "+nodefacts.KubeletConf)))
	if err != nil {
		e.t.Fatalf("%s: kubelet.conf: %v", node, err)
	}
	auth := kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo]
	auth.ClientCertificate, auth.ClientKey = "", ""
	auth.ClientCertificateData, auth.ClientKeyData = nodefacts.PairPEM(pair, nil), keyOf(pair)
	data, err := clientcmd.Write(*kc)
	if err != nil {
		e.t.Fatal(err)
	}
	e.writeNodeFile(ctx, node, nodefacts.KubeletConf, data)
	return pair
}

// keyOf is the key block of a pair file.
func keyOf(pair []byte) []byte {
	var out []byte
	for rest := pair; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return out
		}
		if b.Type != "CERTIFICATE" {
			out = append(out, pem.EncodeToMemory(b)...)
		}
	}
}

// kubeletCert is the certificate in node's kubelet-client-current.pem.
func (e *e2e) kubeletCert(ctx context.Context, node string) *x509.Certificate {
	e.t.Helper()
	c, err := nodefacts.ParseCertPEM([]byte(e.node(ctx, node, "cat "+nodefacts.KubeletClientCert)))
	if err != nil {
		e.t.Fatalf("%s: %s: %v", node, nodefacts.KubeletClientCert, err)
	}
	return c
}

// restartKubelet restarts node's kubelet and waits for it to renew its
// Lease and its Node to be Ready.
func (e *e2e) restartKubelet(ctx context.Context, node string) {
	e.t.Helper()
	e.node(ctx, node, "systemctl restart kubelet")
	e.waitKubelet(ctx, node, e.leaseRenewTime(ctx, node))
}

func (e *e2e) leaseRenewTime(ctx context.Context, node string) string {
	return strings.TrimSpace(e.node(ctx, "cp-1", adminKubectl+"-n kube-node-lease get lease "+node+" -o jsonpath={.spec.renewTime}"))
}

// waitKubelet waits until node's Lease is renewed after before and its
// Node is Ready: its kubelet runs and authenticates.
func (e *e2e) waitKubelet(ctx context.Context, node, before string) {
	e.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		renewed := e.leaseRenewTime(ctx, node)
		ready := strings.TrimSpace(e.node(ctx, "cp-1", adminKubectl+"get node "+node+` -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'`))
		if renewed != before && ready == "True" {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: Lease renewed %s (before: %s), Ready %q: its kubelet does not get through\n%s", node, renewed, before, ready,
				e.node(ctx, node, "systemctl status kubelet 2>&1 | tail -20; true"))
		}
		time.Sleep(2 * time.Second)
	}
}

// checkRotatingKubeconfig: node's kubelet.conf names the rotating file for
// certificate and key, embeds neither, and the file is the node's.
func (e *e2e) checkRotatingKubeconfig(ctx context.Context, node string) {
	e.t.Helper()
	kc, err := clientcmd.Load([]byte(e.node(ctx, node, "cat "+nodefacts.KubeletConf)))
	if err != nil {
		e.t.Fatalf("%s: kubelet.conf: %v", node, err)
	}
	auth := kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo]
	if auth.ClientCertificate != nodefacts.KubeletClientCert || auth.ClientKey != nodefacts.KubeletClientCert || len(auth.ClientCertificateData)+len(auth.ClientKeyData) > 0 {
		e.t.Errorf("%s: kubelet.conf's user names %q and %q, embeds %d bytes", node, auth.ClientCertificate, auth.ClientKey, len(auth.ClientCertificateData)+len(auth.ClientKeyData))
	}
	if c := e.kubeletCert(ctx, node); c.Subject.CommonName != "system:node:"+node {
		e.t.Errorf("%s: the rotating file holds %s", node, c.Subject.CommonName)
	}
}

// checkAbsent fails the test if the stack's state, the engine's output or
// the command log contain any of secrets.
func (e *e2e) checkAbsent(secrets ...string) {
	e.t.Helper()
	haystacks := map[string]string{"engine output": e.log.String()}
	if cmds, err := os.ReadFile(e.cmdLog); err == nil {
		haystacks["command log"] = string(cmds)
	}
	filepath.WalkDir(e.stateDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.Contains(p, "/pulumi-home/") {
			data, _ := os.ReadFile(p)
			haystacks[p] = string(data)
		}
		return nil
	})
	for name, body := range haystacks {
		for _, sec := range secrets {
			if len(sec) >= 8 && strings.Contains(body, sec) {
				e.t.Errorf("%s contains a kubelet key in plain text (%.12s...)", name, sec)
			}
		}
	}
}
