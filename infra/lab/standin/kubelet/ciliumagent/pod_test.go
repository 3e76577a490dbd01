package ciliumagent

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// The agent in its pod: cilium-config from the volume's files, the API
// reached with the service account's CA, then (and only then) the CNI
// configuration through /host.
func TestRunInPodWritesTheConfigurationOnceTheAPIAnswers(t *testing.T) {
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
		}
	}))
	defer api.Close()
	host, port, _ := net.SplitHostPort(api.Listener.Addr().String())
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: api.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "host")
	if err := os.MkdirAll(filepath.Join(root, "etc/cni/net.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/cni/net.d/10-other.conflist"), []byte(`{"name":"other","plugins":[{"type":"bridge"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	config := func(keys map[string]string) string {
		d := t.TempDir()
		// A ConfigMap volume's own entries, which are not keys.
		if err := os.Mkdir(filepath.Join(d, "..data"), 0o755); err != nil {
			t.Fatal(err)
		}
		for k, v := range keys {
			if err := os.WriteFile(filepath.Join(d, k), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}

	// Unreachable: the container fails and nothing is written.
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	_, closedPort, _ := net.SplitHostPort(closed.Addr().String())
	closed.Close()
	routed := map[string]string{}
	var mu sync.Mutex
	node := Node{
		Name: "gpu-1",
		Client: fake.NewClientset(
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp-1"}, Spec: corev1.NodeSpec{PodCIDR: "10.244.0.0/24"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.77.0.120"}}}},
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"}, Spec: corev1.NodeSpec{PodCIDR: "10.244.1.0/24"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.77.0.130"}}}},
		),
		Route: func(dst *net.IPNet, via net.IP) error {
			mu.Lock()
			defer mu.Unlock()
			routed[dst.String()] = via.String()
			return nil
		},
	}
	err := RunInPod(context.Background(), config(map[string]string{"k8s-service-host": "127.0.0.1", "k8s-service-port": closedPort}), ca, root, node, t.Logf)
	if err == nil || !strings.Contains(err.Error(), "unable to contact k8s api-server at 127.0.0.1:"+closedPort) {
		t.Fatalf("unreachable API: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/cni/net.d/05-cilium.conflist")); err == nil {
		t.Fatal("wrote the configuration without reaching the API")
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- RunInPod(ctx, config(map[string]string{"k8s-service-host": host, "k8s-service-port": port, "cni-exclusive": "true"}), ca, root, node, t.Logf)
	}()
	conf := filepath.Join(root, "etc/cni/net.d/05-cilium.conflist")
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := os.Stat(conf); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the agent ended: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no configuration after 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/cni/net.d/10-other.conflist.cilium_bak")); err != nil {
		t.Errorf("cni-exclusive did not set the other network aside: %v", err)
	}
	// gpu-1's pods get its pod CIDR; cp-1's pods are routed to cp-1.
	if data, _ := os.ReadFile(conf); !strings.Contains(string(data), `"subnet": "10.244.1.0/24"`) {
		t.Errorf("gpu-1's conflist:\n%s", data)
	}
	mu.Lock()
	if len(routed) != 1 || routed["10.244.0.0/24"] != "10.77.0.120" {
		t.Errorf("routes: %v", routed)
	}
	mu.Unlock()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("stopped agent: %v", err)
	}
}
