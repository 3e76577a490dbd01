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
	"testing"
	"time"
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
	err := RunInPod(context.Background(), config(map[string]string{"k8s-service-host": "127.0.0.1", "k8s-service-port": closedPort}), ca, root, t.Logf)
	if err == nil || !strings.Contains(err.Error(), "unable to contact k8s api-server at 127.0.0.1:"+closedPort) {
		t.Fatalf("unreachable API: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/cni/net.d/05-cilium.conflist")); err == nil {
		t.Fatal("wrote the configuration without reaching the API")
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- RunInPod(ctx, config(map[string]string{"k8s-service-host": host, "k8s-service-port": port, "cni-exclusive": "true"}), ca, root, t.Logf)
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
	cancel()
	if err := <-done; err != nil {
		t.Errorf("stopped agent: %v", err)
	}
}
