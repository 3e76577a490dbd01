package pods

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/homelab-dev/homelab/infra/lab/standin/cri"
	"github.com/homelab-dev/homelab/infra/lab/standin/images"
)

const (
	node  = "n1"
	pause = "registry.k8s.io/pause:3.10.1"
	// pauseScript behaves as the real pause for -v; any other argument
	// list names an exit code (a stand-in for a container that fails).
	pauseScript = "#!/bin/sh\nfor a; do [ \"$a\" = -v ] && { echo \"$0 version: 3.10.1\"; exit 0; }; done\nexit \"${1:-0}\"\n"
)

type fixture struct {
	t      *testing.T
	dir    string
	client *fake.Clientset
	rt     runtimeapi.RuntimeServiceClient
	store  *images.Store
	netErr error
}

// newFixture: a fake API with the node, the CRI stand-in on a socket, and
// an image tree holding the pause image (a script) and an image whose
// binary exits with its first argument.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: t.TempDir()}
	f.client = fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
	root := filepath.Join(f.dir, "images")
	src := filepath.Join(f.dir, "pause-bin")
	if err := os.WriteFile(src, []byte(pauseScript), 0o755); err != nil {
		t.Fatal(err)
	}
	link := func(src, dst string) error { return os.Link(src, dst) }
	if err := images.Add(root, pause, map[string]string{"pause": src}, link); err != nil {
		t.Fatal(err)
	}
	if err := images.Add(root, "example.org/empty:1", nil, link); err != nil {
		t.Fatal(err)
	}
	f.store = &images.Store{Dir: root}

	sock := filepath.Join(f.dir, "run", "containerd.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- cri.Serve(ctx, cri.Config{Address: "unix://" + sock, ConfigPath: filepath.Join(f.dir, "none.toml"),
			CNIConfDir: filepath.Join(f.dir, "net.d"), CNIBinDirs: []string{filepath.Join(f.dir, "bin")},
			SandboxDir: filepath.Join(f.dir, "run", "sandboxes"), PodStateDir: filepath.Join(f.dir, "cri-pods"),
			ImageFSDir: f.dir, StopGrace: time.Second, Images: f.store, Logf: t.Logf})
	}()
	t.Cleanup(func() { cancel(); <-done })
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	f.rt = runtimeapi.NewRuntimeServiceClient(conn)
	return f
}

// podNetwork gives the node a CNI network and a pod CIDR.
func (f *fixture) podNetwork(cidr string) {
	f.t.Helper()
	for path, content := range map[string]string{
		filepath.Join(f.dir, "net.d", "05-test.conflist"): `{"cniVersion":"0.3.1","name":"test","plugins":[{"type":"test-cni"}]}`,
		filepath.Join(f.dir, "bin", "test-cni"):           "#!/bin/sh\nexit 1\n",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			f.t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
			f.t.Fatal(err)
		}
	}
	n, err := f.client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	n.Spec.PodCIDR = cidr
	if _, err := f.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) syncer() *syncer {
	return newSyncer(f.client, Options{
		NodeName: node, NodeIP: "10.0.0.5", Runtime: f.rt,
		NetworkError: func() error { return f.netErr },
		StateDir:     filepath.Join(f.dir, "state"), LogDir: filepath.Join(f.dir, "logs"),
		Images: f.store, Env: []string{"PATH=/usr/bin:/bin"}, Logf: f.t.Logf,
	})
}

// jobPod is kubeadm's upgrade health check pod (health.go's createJob),
// bound to the node.
func jobPod(name string, policy corev1.RestartPolicy, image string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{
			NodeName:      node,
			RestartPolicy: policy,
			Tolerations:   []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}},
			Containers:    []corev1.Container{{Name: "upgrade-health-check", Image: image, Args: args}},
		},
	}
}

func (f *fixture) create(p *corev1.Pod) {
	f.t.Helper()
	if _, err := f.client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) get(p *corev1.Pod) *corev1.Pod {
	f.t.Helper()
	got, err := f.client.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return got
}

// syncUntil syncs until cond holds for the pod, or fails after timeout.
func (f *fixture) syncUntil(s *syncer, p *corev1.Pod, timeout time.Duration, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	f.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if err := s.sync(context.Background()); err != nil {
			f.t.Logf("sync: %v", err)
		}
		got := f.get(p)
		if cond(got) {
			return got
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%s: not after %s: %+v", what, timeout, got.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func phase(ph corev1.PodPhase) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool { return p.Status.Phase == ph }
}

func (f *fixture) sandboxes(uid types.UID) int {
	f.t.Helper()
	l, err := f.rt.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{labelPodUID: string(uid)}}})
	if err != nil {
		f.t.Fatal(err)
	}
	return len(l.Items)
}

func terminatedState(t *testing.T, p *corev1.Pod) *corev1.ContainerStateTerminated {
	t.Helper()
	if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Terminated == nil {
		t.Fatalf("container statuses %+v", p.Status.ContainerStatuses)
	}
	return p.Status.ContainerStatuses[0].State.Terminated
}

// kubeadm's health check: the pause image with -v runs, exits 0, and the
// pod is Succeeded (what the Job controller completes the Job from); the
// terminal pod's sandbox goes and it is never run again.
func TestRunToCompletionSucceeds(t *testing.T) {
	f := newFixture(t)
	p := jobPod("health", corev1.RestartPolicyNever, pause, "-v")
	f.create(p)
	s := f.syncer()
	// A pod-network pod: the runtime refuses its sandbox until there is a
	// network; it waits, as other pods do.
	for range 2 {
		if err := s.sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.get(p); got.Status.Phase != corev1.PodPending || f.sandboxes(p.UID) != 0 {
		t.Fatalf("without a pod network: %+v", got.Status)
	}
	f.podNetwork("10.244.1.0/24")
	got := f.syncUntil(s, p, 10*time.Second, "Succeeded", phase(corev1.PodSucceeded))
	if got.Status.PodIP != "10.244.1.2" {
		t.Errorf("pod IP %q", got.Status.PodIP)
	}
	term := terminatedState(t, got)
	if term.ExitCode != 0 || term.Reason != "Completed" || term.FinishedAt.IsZero() {
		t.Errorf("terminated %+v", term)
	}
	if got.Status.ContainerStatuses[0].ContainerID == "" {
		t.Error("no container ID")
	}
	logs, _ := filepath.Glob(filepath.Join(f.dir, "logs", "kube-system_health_uid-health", "upgrade-health-check", "0.log"))
	if len(logs) != 1 {
		t.Fatalf("no container log")
	}
	if b, _ := os.ReadFile(logs[0]); !strings.Contains(string(b), "version: 3.10.1") {
		t.Errorf("log %q", b)
	}
	for _, c := range got.Status.Conditions {
		if c.Type == corev1.PodReady && (c.Status != corev1.ConditionFalse || c.Reason != "PodCompleted") {
			t.Errorf("Ready condition %+v", c)
		}
	}
	// The next sync sees it terminal: sandbox and record go, nothing
	// runs again.
	if err := s.sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := f.sandboxes(p.UID); n != 0 {
		t.Errorf("%d sandboxes left", n)
	}
	if _, err := os.Stat(s.recordPath(p.UID)); !os.IsNotExist(err) {
		t.Errorf("record left: %v", err)
	}
	if err := s.sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(logs[0]); strings.Count(string(b), "version") != 1 {
		t.Errorf("ran again: log %q", b)
	}
}

// A non-zero exit is Failed with the code, never Succeeded.
func TestRunToCompletionFails(t *testing.T) {
	f := newFixture(t)
	p := jobPod("fails", corev1.RestartPolicyNever, pause, "3")
	p.Spec.HostNetwork = true
	f.create(p)
	got := f.syncUntil(f.syncer(), p, 10*time.Second, "a terminal phase", func(p *corev1.Pod) bool { return terminal(p.Status.Phase) })
	if got.Status.Phase != corev1.PodFailed {
		t.Fatalf("phase %s, want Failed", got.Status.Phase)
	}
	if term := terminatedState(t, got); term.ExitCode != 3 || term.Reason != "Error" {
		t.Errorf("terminated %+v", term)
	}
	if got.Status.PodIP != "10.0.0.5" {
		t.Errorf("host-network pod IP %q", got.Status.PodIP)
	}
}

// An image the tree lacks is a failed pull, and an image without the
// binary a failed start: neither ever succeeds.
func TestRunToCompletionImageProblems(t *testing.T) {
	defer func(d time.Duration) { backoffUnit = d }(backoffUnit)
	backoffUnit = 10 * time.Millisecond
	f := newFixture(t)
	s := f.syncer()
	missing := jobPod("missing", corev1.RestartPolicyNever, "registry.k8s.io/pause:9.9", "-v")
	missing.Spec.HostNetwork = true
	f.create(missing)
	f.syncUntil(s, missing, 10*time.Second, "ImagePullBackOff", func(p *corev1.Pod) bool {
		if p.Status.Phase != corev1.PodPending {
			t.Fatalf("phase %s for an image the lab lacks", p.Status.Phase)
		}
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "ImagePullBackOff"
	})
	ev, err := f.client.CoreV1().Events("kube-system").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range ev.Items {
		if e.Reason == "Failed" && strings.Contains(e.Message, `Failed to pull image "registry.k8s.io/pause:9.9"`) && strings.Contains(e.Message, "not found") {
			found = true
		}
	}
	if !found {
		t.Errorf("no pull failure event in %v", ev.Items)
	}

	empty := jobPod("empty", corev1.RestartPolicyNever, "example.org/empty:1")
	empty.Spec.HostNetwork = true
	f.create(empty)
	got := f.syncUntil(s, empty, 10*time.Second, "a terminal phase", func(p *corev1.Pod) bool { return terminal(p.Status.Phase) })
	if term := terminatedState(t, got); got.Status.Phase != corev1.PodFailed || term.ExitCode != 128 || term.Reason != "StartError" {
		t.Errorf("phase %s, terminated %+v", got.Status.Phase, term)
	}
}

// A pod-network pod waits for the network, as other pods do: nothing runs.
func TestRunToCompletionWaitsForTheNetwork(t *testing.T) {
	f := newFixture(t)
	f.netErr = errors.New("NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized")
	s := f.syncer()
	p := jobPod("health", corev1.RestartPolicyNever, pause, "-v")
	f.create(p)
	for range 3 {
		if err := s.sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	got := f.get(p)
	if got.Status.Phase != corev1.PodPending || len(got.Status.ContainerStatuses) != 1 || got.Status.ContainerStatuses[0].State.Waiting == nil {
		t.Fatalf("status %+v", got.Status)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "logs", "kube-system_health_uid-health")); !os.IsNotExist(err) {
		t.Errorf("the container ran: %v", err)
	}
	if n := f.sandboxes(p.UID); n != 0 {
		t.Errorf("%d sandboxes", n)
	}
}

// OnFailure: a failed container restarts after its back-off (the restart
// counted, the last end kept) until it succeeds.
func TestRunToCompletionOnFailureRestarts(t *testing.T) {
	defer func(d time.Duration) { backoffUnit = d }(backoffUnit)
	backoffUnit = 300 * time.Millisecond
	f := newFixture(t)
	s := f.syncer()
	marker := filepath.Join(f.dir, "ran-once")
	p := jobPod("retry", corev1.RestartPolicyOnFailure, "registry.k8s.io/pause:3.10.1")
	p.Spec.HostNetwork = true
	// Fails the first time, succeeds the second.
	p.Spec.Containers[0].Command = []string{"sh", "-c", fmt.Sprintf("[ -e %[1]s ] && exit 0; touch %[1]s; exit 2", marker)}
	f.store = nil // sh from PATH
	s.o.Images = nil
	f.create(p)
	f.syncUntil(s, p, 10*time.Second, "CrashLoopBackOff after the first failure", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "CrashLoopBackOff" &&
			cs[0].LastTerminationState.Terminated != nil && cs[0].LastTerminationState.Terminated.ExitCode == 2 && p.Status.Phase == corev1.PodRunning
	})
	got := f.syncUntil(s, p, 10*time.Second, "Succeeded", phase(corev1.PodSucceeded))
	cs := got.Status.ContainerStatuses[0]
	if cs.RestartCount != 1 || cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 || cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 2 {
		t.Errorf("container status %+v", cs)
	}
}

// The container outlives a kubelet restart, and the next kubelet reads
// its exit code; a deleted pod's container is stopped.
func TestRunToCompletionAcrossAKubeletRestartAndDeletion(t *testing.T) {
	f := newFixture(t)
	s := f.syncer()
	s.o.Images = nil
	p := jobPod("slow", corev1.RestartPolicyNever, "registry.k8s.io/pause:3.10.1")
	p.Spec.HostNetwork = true
	p.Spec.Containers[0].Command = []string{"sh", "-c", "sleep 1; exit 4"}
	f.create(p)
	f.syncUntil(s, p, 10*time.Second, "Running", phase(corev1.PodRunning))
	// A new kubelet, with what the old one kept under its state directory.
	s2 := f.syncer()
	s2.o.Images = nil
	got := f.syncUntil(s2, p, 10*time.Second, "Failed", phase(corev1.PodFailed))
	if term := terminatedState(t, got); term.ExitCode != 4 {
		t.Errorf("terminated %+v", term)
	}

	long := jobPod("long", corev1.RestartPolicyNever, "registry.k8s.io/pause:3.10.1")
	long.Spec.HostNetwork = true
	long.Spec.Containers[0].Command = []string{"sleep", "60"}
	f.create(long)
	f.syncUntil(s2, long, 10*time.Second, "Running", phase(corev1.PodRunning))
	r := s2.load(long)
	if len(r.Containers) != 1 || !r.Containers[0].Proc.Alive() {
		t.Fatalf("record %+v", r)
	}
	proc := r.Containers[0].Proc
	cur := f.get(long)
	cur.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	if _, err := f.client.CoreV1().Pods("kube-system").Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s2.sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if proc.Alive() {
		t.Error("the deleted pod's container still runs")
	}
}

// After a reboot (nothing kept under /run), a Never pod the API shows as
// started is not run again: its container was lost.
func TestRunToCompletionLostAfterReboot(t *testing.T) {
	f := newFixture(t)
	p := jobPod("lost", corev1.RestartPolicyNever, pause, "-v")
	p.Spec.HostNetwork = true
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "upgrade-health-check", ContainerID: "containerd://abc",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}}
	f.create(p)
	got := f.syncUntil(f.syncer(), p, 5*time.Second, "Failed", phase(corev1.PodFailed))
	if term := terminatedState(t, got); term.ExitCode != 137 || term.Reason != "ContainerStatusUnknown" {
		t.Errorf("terminated %+v", term)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "logs", "kube-system_lost_uid-lost")); !os.IsNotExist(err) {
		t.Errorf("the container ran again: %v", err)
	}
}
