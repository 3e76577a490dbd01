package provider

import (
	"crypto/x509"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/nodefacts"
	"github.com/homelab-dev/homelab/roles/pki/pkitest"
)

// servingRequest is a kubelet serving CSR of node for the addresses ips.
func servingRequest(t *testing.T, name, node string, ips ...string) certificatesv1.CertificateSigningRequest {
	t.Helper()
	l := pkitest.Leaf{CN: "system:node:" + node, Orgs: []string{"system:nodes"}, DNS: []string{node}}
	for _, ip := range ips {
		l.IPs = append(l.IPs, net.ParseIP(ip))
	}
	return certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pkitest.Request(t, l),
			SignerName: certificatesv1.KubeletServingSignerName,
			Username:   "system:node:" + node,
			Groups:     []string{"system:nodes", "system:authenticated"},
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
		},
	}
}

func csrList(t *testing.T, csrs ...certificatesv1.CertificateSigningRequest) string {
	b, err := json.Marshal(certificatesv1.CertificateSigningRequestList{Items: csrs})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func servingOutput(bootstrap string, cert, ca []byte) string {
	return "== serverTLSBootstrap\n" + bootstrap + "\n== certificate\n" + string(cert) + "== ca\n" + string(ca)
}

// A kubelet of a cluster built without serverTLSBootstrap: up turns it on
// (cluster-wide and on the node), approves the node's own request and
// no other, and is done once the kubelet holds the CA's certificate.
func TestKubeletServingConvertsAndApprovesOnlyTheNodesOwn(t *testing.T) {
	lab := newFakeLab(t)
	cp, gpu := lab.node("cp-1"), lab.node("gpu-1")
	ca := pkitest.NewCA(t, "kubernetes")
	certPEM, _ := ca.Issue(t, pkitest.Leaf{CN: "system:node:gpu-1", Orgs: []string{"system:nodes"}, DNS: []string{"gpu-1"},
		IPs: []net.IP{net.ParseIP(gpu.addr)}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})

	var mu sync.Mutex
	enabled, approved := false, map[string]bool{}
	own := servingRequest(t, "csr-own", "gpu-1", gpu.addr)
	foreign := servingRequest(t, "csr-foreign", "gpu-1", gpu.addr, "10.0.0.100")
	other := servingRequest(t, "csr-cp", "cp-1", cp.addr)
	cp.onScriptFunc("kubectl/csr-list", func(string) (ssh.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		if !enabled {
			return ssh.Result{Stdout: []byte(csrList(t, other))}, nil
		}
		return ssh.Result{Stdout: []byte(csrList(t, own, foreign, other))}, nil
	})
	cp.onScriptFunc("kubectl/csr-approve", func(cmd string) (ssh.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range []string{"csr-own", "csr-foreign", "csr-cp"} {
			if strings.Contains(cmd, n) {
				approved[n] = true
			}
		}
		return ssh.Result{}, nil
	})
	cp.onScript("kubectl/kubelet-config-serving", "", 0)
	gpu.onScriptFunc("kubelet/serving-enable", func(string) (ssh.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		enabled = true
		return ssh.Result{}, nil
	})
	gpu.onScriptFunc("kubelet/serving-read", func(string) (ssh.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case approved["csr-own"]:
			return ssh.Result{Stdout: []byte(servingOutput("true", certPEM, ca.PEM))}, nil
		case enabled:
			return ssh.Result{Stdout: []byte(servingOutput("true", nil, ca.PEM))}, nil
		}
		return ssh.Result{Stdout: []byte(servingOutput("", nil, ca.PEM))}, nil
	})

	in := KubeletServingArgs{Connection: lab.conn("gpu-1"), Via: lab.conn("cp-1"), Node: "gpu-1", Address: gpu.addr}
	resp, err := KubeletServing{}.Create(lab.ctx(), infer.CreateRequest[KubeletServingArgs]{Inputs: in})
	if err != nil {
		t.Fatal(err)
	}
	if !approved["csr-own"] || approved["csr-foreign"] || approved["csr-cp"] {
		t.Errorf("approved %v, want csr-own alone", approved)
	}
	if cp.ran("kubectl/kubelet-config-serving") != 1 || gpu.ran("kubelet/serving-enable") != 1 {
		t.Error("serverTLSBootstrap not turned on in kubelet-config and on the node, once each")
	}
	st := resp.Output
	if !st.LiveBootstrap || st.LiveCertificate == "" {
		t.Errorf("state %+v lacks what the node has", st)
	}
	if d := servingChanges(in, st, time.Now()); len(d) != 0 {
		t.Errorf("after converging: changes %v", d)
	}

	// A later read: nothing pending of the node's that up would approve
	// (the foreign request is doctor's to report), so nothing to do.
	cp.onScript("kubectl/csr-list", csrList(t, foreign, other), 0)
	read, err := KubeletServing{}.Read(lab.ctx(), infer.ReadRequest[KubeletServingArgs, KubeletServingState]{ID: "gpu-1", Inputs: in, State: st})
	if err != nil {
		t.Fatal(err)
	}
	if d := servingChanges(in, read.State, time.Now()); len(d) != 0 {
		t.Errorf("read back: changes %v (state %+v)", d, read.State.LivePending)
	}
	// The kubelet renewing: its new request is pending, and approvable.
	cp.onScript("kubectl/csr-list", csrList(t, servingRequest(t, "csr-renew", "gpu-1", gpu.addr)), 0)
	read, err = KubeletServing{}.Read(lab.ctx(), infer.ReadRequest[KubeletServingArgs, KubeletServingState]{ID: "gpu-1", Inputs: in, State: st})
	if err != nil {
		t.Fatal(err)
	}
	if d := servingChanges(in, read.State, time.Now()); !d.has("pending") || strings.Join(read.State.LivePending, ",") != "csr-renew" {
		t.Errorf("a renewal to approve: changes %v, pending %v", d, read.State.LivePending)
	}

	scriptstest.Golden(t, servingReadScript, "")
	scriptstest.Golden(t, scripts.Render("kubelet/serving-enable", servingReadArgs{Config: nodefacts.KubeletConfigFile}), "")
	scriptstest.Golden(t, scripts.Render("kubectl/kubelet-config-serving", kubectlArgs{Kubectl: kubectl}), "")
	scriptstest.Golden(t, scripts.Render("kubectl/csr-list", kubectlArgs{Kubectl: kubectl}), "")
	scriptstest.Golden(t, scripts.Render("kubectl/csr-approve", csrArgs{Kubectl: kubectl, Name: "csr-own"}), "")
}

// The endpoint blipping while the node waits for its certificate (a
// control-plane node joining beside it) is outlived, in the listing and in
// the approval; a refusal is not retried.
func TestKubeletServingOutlivesEndpointBlips(t *testing.T) {
	lab := newFakeLab(t)
	cp, gpu := lab.node("cp-1"), lab.node("gpu-1")
	ca := pkitest.NewCA(t, "kubernetes")
	certPEM, _ := ca.Issue(t, pkitest.Leaf{CN: "system:node:gpu-1", Orgs: []string{"system:nodes"}, DNS: []string{"gpu-1"},
		IPs: []net.IP{net.ParseIP(gpu.addr)}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	blip := ssh.Result{ExitCode: 1, Stderr: []byte("Unable to connect to the server: net/http: TLS handshake timeout\n")}
	reset := ssh.Result{ExitCode: 1, Stderr: []byte("error: Get \"https://10.0.0.100:6443/apis\": write tcp 10.0.0.11:44998->10.0.0.100:6443: write: connection reset by peer\n")}
	var mu sync.Mutex
	lists, approvals, approved := 0, 0, false
	cp.onScriptFunc("kubectl/csr-list", func(string) (ssh.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		if lists++; lists == 1 {
			return blip, nil
		}
		return ssh.Result{Stdout: []byte(csrList(t, servingRequest(t, "csr-own", "gpu-1", gpu.addr)))}, nil
	})
	cp.onScriptFunc("kubectl/csr-approve", func(string) (ssh.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		if approvals++; approvals == 1 {
			return reset, nil
		}
		approved = true
		return ssh.Result{}, nil
	})
	gpu.onScriptFunc("kubelet/serving-read", func(string) (ssh.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		if approved {
			return ssh.Result{Stdout: []byte(servingOutput("true", certPEM, ca.PEM))}, nil
		}
		return ssh.Result{Stdout: []byte(servingOutput("true", nil, ca.PEM))}, nil
	})
	ctx := withProbes(lab.ctx(), probes{poll: time.Millisecond, timeout: time.Minute})
	in := KubeletServingArgs{Connection: lab.conn("gpu-1"), Via: lab.conn("cp-1"), Node: "gpu-1", Address: gpu.addr}
	if _, err := (KubeletServing{}).Create(ctx, infer.CreateRequest[KubeletServingArgs]{Inputs: in}); err != nil {
		t.Fatalf("a blip failed the step: %v", err)
	}
	if lists < 2 || approvals != 2 || !approved {
		t.Errorf("listed %d times, approved %d times (done: %v): want the blipped list and approval asked again", lists, approvals, approved)
	}

	// A refusal is the API's answer, not a blip: named at once.
	approvals, approved = 0, false
	cp.onScriptFunc("kubectl/csr-approve", func(string) (ssh.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		approvals++
		return ssh.Result{ExitCode: 1, Stderr: []byte("Error from server (Forbidden): certificatesigningrequests.certificates.k8s.io \"csr-own\" is forbidden\n")}, nil
	})
	_, err := (KubeletServing{}).Create(ctx, infer.CreateRequest[KubeletServingArgs]{Inputs: in})
	if err == nil || !strings.Contains(err.Error(), "Forbidden") || !strings.Contains(err.Error(), "csr-own") {
		t.Errorf("a refused approval: %v, want it named", err)
	}
	if approvals != 1 {
		t.Errorf("a refused approval was run %d times, want once", approvals)
	}
}

func TestServingChanges(t *testing.T) {
	ca := pkitest.NewCA(t, "kubernetes")
	leaf := pkitest.Leaf{CN: "system:node:gpu-1", Orgs: []string{"system:nodes"}, DNS: []string{"gpu-1"},
		IPs: []net.IP{net.ParseIP("10.0.0.131")}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	good, _ := ca.Issue(t, leaf)
	in := KubeletServingArgs{Node: "gpu-1", Address: "10.0.0.131"}
	ok := KubeletServingState{KubeletServingArgs: in, LiveBootstrap: true, LiveCertificate: string(good), LiveCA: string(ca.PEM)}
	now := time.Now()
	cases := []struct {
		name string
		in   KubeletServingArgs
		edit func(*KubeletServingState)
		want []string
	}{
		{name: "serving with the CA's certificate", in: in},
		{name: "bootstrap off", in: in, edit: func(s *KubeletServingState) { s.LiveBootstrap = false }, want: []string{"serverTLSBootstrap"}},
		{name: "self-signed", in: in, edit: func(s *KubeletServingState) {
			self, _ := pkitest.NewCA(t, "gpu-1-ca").Issue(t, leaf)
			s.LiveCertificate = string(self)
		}, want: []string{"certificate"}},
		{name: "no certificate", in: in, edit: func(s *KubeletServingState) { s.LiveCertificate = "" }, want: []string{"certificate"}},
		{name: "re-addressed", in: KubeletServingArgs{Node: "gpu-1", Address: "10.0.0.140"}, want: []string{"certificate"}},
		{name: "a request to approve", in: in, edit: func(s *KubeletServingState) { s.LivePending = []string{"csr-1"} }, want: []string{"pending"}},
		{name: "renamed", in: KubeletServingArgs{Node: "gpu-9", Address: "10.0.0.131"}, want: []string{"node"}},
	}
	for _, c := range cases {
		st := ok
		if c.edit != nil {
			c.edit(&st)
		}
		d := servingChanges(c.in, st, now)
		if len(d) != len(c.want) || !d.has(c.want...) && len(c.want) > 0 {
			t.Errorf("%s: changes %v, want %v", c.name, d, c.want)
		}
	}
	if servingChanges(in, ok, now.Add(2*time.Hour)).has("certificate") != true {
		t.Error("an expired certificate is no change")
	}
}

// Every reason a node ends without its certificate is named, with what to
// do.
func TestServingTimeoutNamesTheRequests(t *testing.T) {
	in := KubeletServingArgs{Node: "gpu-1", Address: "10.0.0.131"}
	err := servingTimeout(in, errTest("no certificate"), map[string]error{"csr-b": errTest("IP address 10.0.0.100 is not declared"), "csr-a": errTest("DNS name x")})
	for _, want := range []string{"gpu-1", "csr-a", "csr-b", "10.0.0.100", "inventory", "kubectl certificate deny"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v: does not name %q", err, want)
		}
	}
	if err := servingTimeout(in, errTest("no certificate"), nil); !strings.Contains(err.Error(), "journalctl -u kubelet") {
		t.Errorf("%v: does not say where to look", err)
	}
}

type errTest string

func (e errTest) Error() string { return string(e) }
