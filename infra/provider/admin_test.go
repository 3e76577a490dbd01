package provider

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// adminKubeconfig is an admin.conf whose client certificate ends at
// notAfter.
func adminKubeconfig(t *testing.T, notAfter time.Time) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "kubernetes-admin", Organization: []string{"kubeadm:cluster-admins"}},
		NotBefore: notAfter.Add(-time.Hour), NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["homelab"] = &clientcmdapi.Cluster{Server: "https://10.0.0.100:6443"}
	cfg.AuthInfos["kubernetes-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: pemOf(der)}
	cfg.Contexts["admin"] = &clientcmdapi.Context{Cluster: "homelab", AuthInfo: "kubernetes-admin"}
	cfg.CurrentContext = "admin"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func withAdmin(st KubeadmInitState, kc string) KubeadmInitState {
	st.AdminKubeconfig = kc
	return st
}

// adminLab is the bootstrap node cp-1, set up, and its peer cp-2, each
// with an admin.conf as given ("" for none) and an API that answers or not.
func adminLab(t *testing.T, cp1, cp2 string, cp2Answers string) (*fakeLab, KubeadmInitArgs) {
	lab := newFakeLab(t)
	n1, n2 := lab.node("cp-1"), lab.node("cp-2")
	n1.onScript("nodefacts/state", nodefacts.StateSetUp+"\n", 0)
	n1.onScript("cluster/uid", "", 1) // the API refuses the expired certificates
	if cp1 != "" {
		n1.put(adminConf, cp1, 0o600)
	}
	n2.onScript("cluster/peer", cp2Answers+"\n", 0)
	n2.onScript("cluster/uid", "uid-1", 0)
	if cp2 != "" {
		n2.put(adminConf, cp2, 0o600)
	}
	return lab, KubeadmInitArgs{Connection: lab.conn("cp-1"), Peers: []Connection{lab.conn("cp-2")}, ConfigSha: "a"}
}

// The stack's admin kubeconfig is read from where the cluster runs, and an
// expired one only when no node has another: a peer whose API answers
// with a valid admin.conf is preferred to the bootstrap node's expired one.
func TestAnExpiredAdminKubeconfigIsTheLastChoice(t *testing.T) {
	expired, valid := adminKubeconfig(t, time.Now().Add(-time.Minute)), adminKubeconfig(t, time.Now().Add(time.Hour))
	lab, in := adminLab(t, expired, valid, nodefacts.StateSetUp)
	last := KubeadmInitState{KubeadmInitArgs: in, Initialized: true, AdminKubeconfig: expired, ClusterUID: "uid-1"}
	st := refresh(t, lab.ctx(), KubeadmInit{}, in, last)
	if st.AdminKubeconfig != valid || st.ClusterUID != "uid-1" {
		t.Errorf("took cp-1's expired admin.conf over cp-2's valid one")
	}
	// Nowhere valid: the bootstrap node's, expired, and the up reads it
	// again after the revival.
	lab, in = adminLab(t, expired, "", nodefacts.StateNone)
	st = refresh(t, lab.ctx(), KubeadmInit{}, in, last)
	if st.AdminKubeconfig != expired || !st.Initialized {
		t.Errorf("an expired cluster's state: initialized %v, its own admin.conf %v", st.Initialized, st.AdminKubeconfig == expired)
	}
	if d := initChanges(in, st, time.Now()); !d.has("adminKubeconfig") || d.has("initialized") {
		t.Errorf("changes %v", kinds(d))
	}
	renewed := adminKubeconfig(t, time.Now().Add(time.Hour))
	lab.node("cp-1").put(adminConf, renewed, 0o600)
	out, err := KubeadmInit{}.Update(lab.ctx(), infer.UpdateRequest[KubeadmInitArgs, KubeadmInitState]{ID: "cluster", Inputs: in, State: st})
	if err != nil {
		t.Fatal(err)
	}
	if out.Output.AdminKubeconfig != renewed || out.Output.ClusterUID != "uid-1" {
		t.Errorf("after the revival the stack's admin kubeconfig is not the renewed one")
	}
	for _, n := range lab.nodes {
		if m := n.mutations(); len(m) > 0 {
			t.Errorf("%s: reading admin.conf again ran %v", n.name, m)
		}
	}
}

// A peer holding etcd's data whose API does not answer (an expired
// control plane) says nothing about whether the cluster exists: the last
// state stands, and no init is due, even when the bootstrap node is blank.
func TestAPeerWithDataButNoAPIKeepsTheCluster(t *testing.T) {
	lab := newFakeLab(t)
	n1, n2 := lab.node("cp-1"), lab.node("cp-2")
	n1.onScript("nodefacts/state", nodefacts.StateNone+"\n", 0)
	n2.onScript("cluster/peer", peerData+"\n", 0)
	in := KubeadmInitArgs{Connection: lab.conn("cp-1"), Peers: []Connection{lab.conn("cp-2")}, ConfigSha: "a"}
	last := KubeadmInitState{KubeadmInitArgs: in, Initialized: true, AdminKubeconfig: "apiVersion: v1", ClusterUID: "uid-1"}
	st := refresh(t, lab.ctx(), KubeadmInit{}, in, last)
	if !st.Initialized || st.ClusterUID != "uid-1" {
		t.Errorf("a peer with data read as no cluster: %+v", st)
	}
	if d := initChanges(in, st, time.Now()); len(d) > 0 {
		t.Errorf("changes %v", kinds(d))
	}
	// Without the data it is no cluster, as before.
	n2.onScript("cluster/peer", nodefacts.StateNone+"\n", 0)
	if st := refresh(t, lab.ctx(), KubeadmInit{}, in, last); st.Initialized {
		t.Error("blank nodes read as a cluster")
	}
	if strings.Contains(strings.Join(n2.mutations(), ""), "kubeadm") {
		t.Errorf("a read ran %v", n2.mutations())
	}
}
