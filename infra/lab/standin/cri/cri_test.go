package cri

import (
	"context"
	"encoding/json"
	"github.com/homelab-dev/homelab/infra/tools/toolstest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/homelab-dev/homelab/infra/envvars"
	"github.com/homelab-dev/homelab/infra/lab/standin/images"
	"github.com/homelab-dev/homelab/infra/lab/standin/kubelet/staticpod"
)

type fixture struct {
	sock, state string
	// cniDir and binDir are the node's /etc/cni/net.d and /opt/cni/bin.
	cniDir, binDir string
	rt             runtimeapi.RuntimeServiceClient
	img            runtimeapi.ImageServiceClient
}

// start serves the stand-in with containerd's config.toml holding toml
// (imports relative to the test's directory: %s is replaced by it).
func start(t *testing.T, toml string) *fixture { return startWith(t, toml, nil) }

// startWith is start with an image store (nil: every image is there).
func startWith(t *testing.T, toml string, store *images.Store) *fixture {
	t.Helper()
	d := t.TempDir()
	f := &fixture{sock: filepath.Join(d, "run", "containerd.sock"), state: filepath.Join(d, "pods"),
		cniDir: filepath.Join(d, "net.d"), binDir: filepath.Join(d, "bin")}
	configPath := filepath.Join(d, "config.toml")
	if err := os.WriteFile(configPath, []byte(strings.ReplaceAll(toml, "%s", d)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, Config{Address: "unix://" + f.sock, ConfigPath: configPath, CNIConfDir: f.cniDir, CNIBinDirs: []string{f.binDir},
			SandboxDir: filepath.Join(d, "run", "sandboxes"), PodStateDir: f.state, ImageFSDir: d, StopGrace: time.Second, Images: store, Logf: t.Logf})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if _, err := os.Stat(f.sock); err == nil {
			t.Error("socket left behind")
		}
	})
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(f.sock); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	conn, err := grpc.NewClient("unix://"+f.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	f.rt = runtimeapi.NewRuntimeServiceClient(conn)
	f.img = runtimeapi.NewImageServiceClient(conn)
	return f
}

func TestRuntimeAndImages(t *testing.T) {
	f := start(t, "version = 3\n")
	ctx := context.Background()
	v, err := f.rt.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if v.RuntimeName != RuntimeName || v.RuntimeApiVersion != "v1" {
		t.Errorf("version %+v", v)
	}
	st, err := f.rt.Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range st.Status.Conditions {
		if c.Status != (c.Type == runtimeapi.RuntimeReady) {
			t.Errorf("condition %s %v without a CNI config", c.Type, c.Status)
		}
	}
	var cfg struct{ SandboxImage string }
	if err := json.Unmarshal([]byte(st.Info["config"]), &cfg); err != nil || cfg.SandboxImage != DefaultSandboxImage {
		t.Errorf("info config %q: %v", st.Info["config"], err)
	}

	is, err := f.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "registry.k8s.io/kube-apiserver:v1.34.4"}})
	if err != nil || is.Image == nil || is.Image.RepoTags[0] != "registry.k8s.io/kube-apiserver:v1.34.4" || is.Image.Size == 0 {
		t.Fatalf("image status %+v: %v", is, err)
	}
	pr, err := f.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "docker.io/library/busybox"}})
	if err != nil || pr.ImageRef != image("docker.io/library/busybox:latest").Id {
		t.Fatalf("pull %+v: %v", pr, err)
	}
	li, err := f.img.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil || len(li.Images) != 2 || li.Images[1].RepoTags[0] != "docker.io/library/busybox:latest" {
		t.Fatalf("list %+v: %v", li, err)
	}
	fs, err := f.img.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil || fs.ImageFilesystems[0].UsedBytes.Value == 0 {
		t.Fatalf("fs info %+v: %v", fs, err)
	}
	lc, err := f.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil || len(lc.Containers) != 0 {
		t.Fatalf("containers %+v: %v", lc, err)
	}
}

// kubeadm reset stops the kubelet and then removes all pod sandboxes: that
// must end the static pod processes.
func TestSandboxesAreStaticPods(t *testing.T) {
	f := start(t, "version = 3\n")
	ctx := context.Background()
	manifests := t.TempDir()
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: etcd, namespace: kube-system}\nspec:\n  containers:\n  - name: etcd\n    image: x\n    command: [sleep, \"2001\"]\n"
	if err := os.WriteFile(filepath.Join(manifests, "etcd.yaml"), []byte(pod), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Minute)
	_ = os.Chtimes(filepath.Join(manifests, "etcd.yaml"), old, old)
	sctx, stop := context.WithCancel(ctx)
	sup := &staticpod.Supervisor{ManifestDir: manifests, StateDir: f.state, LogDir: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"}, PollInterval: 100 * time.Millisecond, Logf: t.Logf}
	supDone := make(chan struct{})
	go func() { _ = sup.Run(sctx); close(supDone) }()
	var rec staticpod.Record
	for i := 0; i < 100; i++ {
		if recs, _ := staticpod.LoadRecords(f.state); len(recs) == 1 && recs[0].Alive() {
			rec = recs[0]
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	<-supDone
	if rec.PID == 0 {
		t.Fatal("static pod did not start")
	}
	t.Cleanup(func() { rec.Stop(time.Second) })

	l, err := f.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(l.Items) != 1 || l.Items[0].Metadata.Name != "etcd" {
		t.Fatalf("sandboxes %+v: %v", l, err)
	}
	id := l.Items[0].Id
	if _, err := f.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Fatal(err)
	}
	if rec.Alive() {
		t.Fatal("process survived StopPodSandbox")
	}
	if _, err := f.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Fatal(err)
	}
	if l, _ := f.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); len(l.Items) != 0 {
		t.Fatalf("sandboxes left: %+v", l.Items)
	}
	if _, err := f.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Fatalf("removing twice: %v", err)
	}
}

// The real kubeadm's image pull goes through ImageStatus/PullImage.
func TestKubeadmPullsImages(t *testing.T) {
	kubeadm := kubeBin("kubeadm")
	if kubeadm == "" {
		toolstest.Missing(t, "kubeadm not built (infra/tools/build-kube.sh)")
	}
	f := start(t, "version = 3\n")
	out, err := exec.Command(kubeadm, "config", "images", "pull", "--kubernetes-version", "v1.34.4",
		"--cri-socket", "unix://"+f.sock).CombinedOutput()
	if err != nil {
		t.Fatalf("kubeadm config images pull: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "registry.k8s.io/kube-apiserver:v1.34.4") {
		t.Errorf("output:\n%s", out)
	}
	t.Logf("%s", out)
}

// With the lab's image store, kubeadm pulls what the store holds and its
// preflight fails, naming the image, for a version the store lacks.
func TestKubeadmPullsOnlyStoredImages(t *testing.T) {
	kubeadm := kubeBin("kubeadm")
	if kubeadm == "" {
		toolstest.Missing(t, "kubeadm not built (infra/tools/build-kube.sh)")
	}
	list, err := exec.Command(kubeadm, "config", "images", "list", "--kubernetes-version", "v1.34.4").Output()
	if err != nil {
		t.Fatal(err)
	}
	store := &images.Store{Dir: t.TempDir()}
	for _, ref := range strings.Fields(string(list)) {
		if err := images.Add(store.Dir, ref, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	f := startWith(t, "version = 3\n", store)
	pull := func(version string) (string, error) {
		out, err := exec.Command(kubeadm, "config", "images", "pull", "--kubernetes-version", version, "--cri-socket", "unix://"+f.sock).CombinedOutput()
		return string(out), err
	}
	if out, err := pull("v1.34.4"); err != nil {
		t.Fatalf("pulling the stored images: %v\n%s", err, out)
	}
	out, err := pull("v1.34.5")
	if err == nil || !strings.Contains(out, "registry.k8s.io/kube-apiserver:v1.34.5") || !strings.Contains(out, "not found") {
		t.Errorf("pulling a version the store lacks: %v\n%s", err, out)
	}
	is, err := f.img.ImageStatus(context.Background(), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "registry.k8s.io/kube-apiserver:v1.34.5"}})
	if err != nil || is.Image != nil {
		t.Errorf("status of an image the store lacks: %+v, %v; want no image", is, err)
	}
}

func kubeBin(name string) string {
	home, _ := os.UserHomeDir()
	dir := filepath.Join(home, ".cache", "homelab", "tools", "kubernetes-v1.34.4")
	if d := os.Getenv(envvars.KubeBinDir); d != "" {
		dir = d
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}
