package ciliumagent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/homelab-dev/homelab/infra/cniconf"
)

func TestMatch(t *testing.T) {
	a := &Agent{}
	pod := func(ns, app, ownerKind, owner string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Labels: map[string]string{"k8s-app": app},
			OwnerReferences: []metav1.OwnerReference{{Kind: ownerKind, Name: owner}}}}
	}
	for _, tc := range []struct {
		p    *corev1.Pod
		want bool
	}{
		{pod("kube-system", "cilium", "DaemonSet", "cilium"), true},
		{pod("kube-system", "cilium-operator", "ReplicaSet", "cilium-operator-5d"), false},
		{pod("default", "cilium", "DaemonSet", "cilium"), false},
		{pod("kube-system", "cilium", "DaemonSet", "cilium-envoy"), false},
	} {
		if a.Match(tc.p) != tc.want {
			t.Errorf("Match(%s %v %v) != %v", tc.p.Namespace, tc.p.Labels, tc.p.OwnerReferences, tc.want)
		}
	}
}

func TestSettingsFrom(t *testing.T) {
	s := SettingsFrom(map[string]string{"k8s-service-host": "10.0.0.100", "k8s-service-port": "6443", "write-cni-conf-when-ready": "/host/etc/cni/net.d/05-cilium.conflist"})
	if s.ServiceHost != "10.0.0.100" || s.ServicePort != "6443" || s.ConfPath != "/etc/cni/net.d/05-cilium.conflist" || !s.Exclusive {
		t.Errorf("%+v", s)
	}
	if s := SettingsFrom(map[string]string{"cni-exclusive": "false"}); s.Exclusive || s.ConfPath != "/etc/cni/net.d/05-cilium.conflist" {
		t.Errorf("defaults: %+v", s)
	}
}

// The agent writes its configuration only once it reached the API where
// cilium-config says; it sets other networks' configurations aside.
func TestStart(t *testing.T) {
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			w.Write([]byte("ok"))
			return
		}
		http.NotFound(w, r)
	}))
	defer api.Close()
	pool := x509.NewCertPool()
	pool.AddCert(api.Certificate())
	host := strings.TrimPrefix(api.URL, "https://")
	h, p, _ := strings.Cut(host, ":")

	root := t.TempDir()
	netd := filepath.Join(root, cniconf.ConfDir)
	os.MkdirAll(netd, 0o755)
	os.WriteFile(filepath.Join(netd, "10-flannel.conflist"), []byte(`{"name":"cbr0","plugins":[{"type":"flannel"}]}`), 0o644)

	client := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ConfigMap, Namespace: Namespace},
		Data: map[string]string{"k8s-service-host": h, "k8s-service-port": "1"}})
	a := &Agent{Client: client, TLS: &tls.Config{RootCAs: pool}, Root: root}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace}}
	if err := a.Start(context.Background(), pod); err == nil || !strings.Contains(err.Error(), "unable to contact k8s api-server") {
		t.Fatalf("API unreachable: %v", err)
	}
	if _, err := os.Stat(filepath.Join(netd, ConfigFile)); err == nil {
		t.Fatal("wrote the CNI configuration without reaching the API")
	}
	cm, _ := client.CoreV1().ConfigMaps(Namespace).Get(context.Background(), ConfigMap, metav1.GetOptions{})
	cm.Data["k8s-service-port"] = p
	client.CoreV1().ConfigMaps(Namespace).Update(context.Background(), cm, metav1.UpdateOptions{})
	if err := a.Start(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	n, err := cniconf.Load(netd)
	if err != nil || n.File != ConfigFile || n.Plugins[0] != "cilium-cni" {
		t.Errorf("containerd would load %+v (%v)", n, err)
	}
	if _, err := os.Stat(filepath.Join(netd, "10-flannel.conflist.cilium_bak")); err != nil {
		t.Errorf("another network's configuration was not set aside: %v", err)
	}
	if st, err := os.Stat(filepath.Join(root, cniconf.BinDir, "cilium-cni")); err != nil || st.Mode()&0o111 == 0 {
		t.Errorf("plugin: %v %v", st, err)
	}
}
