package kubelet

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/lab/standin/kubelet/staticpod"
)

func TestVersion(t *testing.T) {
	r, w, _ := os.Pipe()
	stdout := os.Stdout
	os.Stdout = w
	code := Main([]string{"--version"})
	os.Stdout = stdout
	w.Close()
	out, _ := io.ReadAll(r)
	if code != 0 || string(out) != "Kubernetes v1.34.4\n" {
		t.Fatalf("exit %d, output %q", code, out)
	}
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// A kubelet started while the previous one is still stopping must wait for
// it, then take its static pods over.
func TestStandaloneRestartOverlap(t *testing.T) {
	d := t.TempDir()
	manifests := filepath.Join(d, "manifests")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	m := "apiVersion: v1\nkind: Pod\nmetadata: {name: sleeper}\nspec:\n  containers:\n  - {name: c, image: x, command: [sleep, \"3001\"]}\n"
	if err := os.WriteFile(filepath.Join(manifests, "sleeper.yaml"), []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Minute)
	_ = os.Chtimes(filepath.Join(manifests, "sleeper.yaml"), old, old)
	addr := freePort(t)
	var mu sync.Mutex
	var logs []string
	cfg := Config{
		NodeName:       "n1",
		RootDir:        d,
		ManifestDir:    manifests,
		LogDir:         filepath.Join(d, "logs"),
		HealthzAddress: addr,
		Env:            []string{"PATH=/usr/bin:/bin"},
		PollInterval:   100 * time.Millisecond,
		Logf: func(f string, a ...any) {
			mu.Lock()
			logs = append(logs, fmt.Sprintf(f, a...))
			mu.Unlock()
			t.Logf(f, a...)
		},
	}
	state := filepath.Join(d, "standin", "pods")
	t.Cleanup(func() {
		recs, _ := staticpod.LoadRecords(state)
		for _, r := range recs {
			r.Stop(time.Second)
		}
	})
	run := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := Run(ctx, cfg); err != nil {
				t.Error(err)
			}
		}()
		return func() { cancel(); <-done }
	}

	stop1 := run()
	deadline := time.Now().Add(5 * time.Second)
	var rec staticpod.Record
	for time.Now().Before(deadline) && rec.PID == 0 {
		if recs, _ := staticpod.LoadRecords(state); len(recs) == 1 && recs[0].Alive() {
			rec = recs[0]
		}
		time.Sleep(50 * time.Millisecond)
	}
	if rec.PID == 0 {
		t.Fatal("static pod not started")
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "ok" {
		t.Fatalf("healthz %q", body)
	}

	stop2 := run()
	defer stop2()
	time.Sleep(500 * time.Millisecond)
	stop1()
	time.Sleep(800 * time.Millisecond)
	recs, _ := staticpod.LoadRecords(state)
	if len(recs) != 1 || recs[0].PID != rec.PID || !recs[0].Alive() {
		t.Fatalf("records after overlap %+v, want pid %d", recs, rec.PID)
	}
	mu.Lock()
	joined := strings.Join(logs, "\n")
	mu.Unlock()
	if !strings.Contains(joined, "waiting for the previous kubelet") || !strings.Contains(joined, "re-adopted pid") {
		t.Errorf("logs:\n%s", joined)
	}
	// The second kubelet serves healthz once the first let go of the port.
	deadline = time.Now().Add(3 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("healthz after handover: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A kubelet.conf that names a certificate file that is not there, with no
// bootstrap kubeconfig (kubeadm removed it after the join), ends the
// stand-in with an error, as it ends the kubelet: systemd then restarts it
// and reports it activating, its healthz does not answer, its Lease goes
// stale. A repair that points kubelet.conf at a missing file shows.
func TestMissingClientCertificateEndsTheKubelet(t *testing.T) {
	d := t.TempDir()
	manifests := filepath.Join(d, "manifests")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(d, "pki", "kubelet-client-current.pem")
	kubeconfig := filepath.Join(d, "kubelet.conf")
	conf := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"https://127.0.0.1:1\"}\nusers:\n- name: u\n  user:\n" +
		"    client-certificate: " + missing + "\n    client-key: " + missing + "\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n"
	if err := os.WriteFile(kubeconfig, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		NodeName:                "n1",
		RootDir:                 d,
		ManifestDir:             manifests,
		LogDir:                  filepath.Join(d, "logs"),
		KubeconfigPath:          kubeconfig,
		BootstrapKubeconfigPath: filepath.Join(d, "bootstrap-kubelet.conf"),
		RotateCertificates:      true,
		Env:                     []string{"PATH=/usr/bin:/bin"},
		CredentialRetry:         10 * time.Millisecond,
		Logf:                    t.Logf,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := Run(ctx, cfg)
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "kubelet-client-current.pem") {
		t.Errorf("Run: %v (context %v), want it to end naming the missing file", err, ctx.Err())
	}
}
