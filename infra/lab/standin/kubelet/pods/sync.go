package pods

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/homelab-dev/homelab/infra/lab/standin/images"
	"github.com/homelab-dev/homelab/infra/lab/standin/kubelet/apiview"
)

// DefaultStateDir is where the stand-in remembers which pods' containers
// it started. Under /run like the runtime's state: a kubelet restart keeps
// them running, a reboot starts them again.
const DefaultStateDir = "/run/homelab-kubelet/pods"

// Labels the kubelet puts on a pod's sandbox.
const (
	labelPodName      = "io.kubernetes.pod.name"
	labelPodNamespace = "io.kubernetes.pod.namespace"
	labelPodUID       = "io.kubernetes.pod.uid"
)

// Agent emulates what one kind of pod's containers do to the node when
// they start (the lab cannot run them). An error is a crash of the
// container: it is retried with the kubelet's back-off.
type Agent interface {
	Match(pod *corev1.Pod) bool
	Start(ctx context.Context, pod *corev1.Pod) error
}

// Options for Run.
type Options struct {
	NodeName string
	NodeIP   string
	Runtime  runtimeapi.RuntimeServiceClient
	// NetworkError is the kubelet's view of the runtime's network: nil
	// once ready.
	NetworkError func() error
	StateDir     string
	// Root prefixes hostPath volumes ("" is /).
	Root     string
	Agents   []Agent
	Interval time.Duration
	// API is where the Node and its pods are read (nil: polled with the
	// client on every sync); Changed, when set, starts a sync at once.
	API     apiview.Source
	Changed <-chan struct{}
	// Images is where a run-to-completion pod's container binaries come
	// from (nil: Env's PATH, for tests); on a node, the lab's image tree.
	Images *images.Store
	// Env is the base environment of the containers the stand-in runs.
	Env []string
	// LogDir holds their output, as NAMESPACE_NAME_UID/CONTAINER/N.log
	// (default /var/log/pods).
	LogDir string
	Logf   func(format string, args ...any)
}

// Run syncs the node's pods until ctx ends.
func Run(ctx context.Context, client kubernetes.Interface, o Options) {
	s := newSyncer(client, o)
	o = s.o
	var lastErr string
	for {
		err := s.sync(ctx)
		switch {
		case err != nil && err.Error() != lastErr && ctx.Err() == nil:
			o.Logf("pods: %v", err)
			lastErr = err.Error()
		case err == nil && lastErr != "":
			o.Logf("pods: ok again")
			lastErr = ""
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(o.Interval):
		case <-s.wake: // a container ended
		case <-o.Changed:
		}
	}
}

func newSyncer(client kubernetes.Interface, o Options) *syncer {
	if o.Interval <= 0 {
		o.Interval = 2 * time.Second
	}
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir
	}
	if o.API == nil {
		o.API = apiview.Poll{Client: client, NodeName: o.NodeName}
	}
	if o.Logf == nil {
		o.Logf = log.Printf
	}
	if o.NetworkError == nil {
		o.NetworkError = func() error { return nil }
	}
	if o.LogDir == "" {
		o.LogDir = "/var/log/pods"
	}
	return &syncer{client: client, o: o, posted: map[types.UID]string{}, events: map[string]bool{}, wake: make(chan struct{}, 1)}
}

type syncer struct {
	client kubernetes.Interface
	o      Options
	// posted is the view last posted per pod: unchanged pods cost no
	// writes.
	posted  map[types.UID]string
	events  map[string]bool
	podCIDR string
	// wake cuts the wait before the next sync short.
	wake chan struct{}
}

// record is what the stand-in keeps of a pod it set up.
type record struct {
	UID       types.UID `json:"uid"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	SandboxID string    `json:"sandboxID,omitempty"`
	Started   time.Time `json:"started,omitzero"`
	Restarts  int       `json:"restarts,omitempty"`
	LastExit  string    `json:"lastExit,omitempty"`
	NextTry   time.Time `json:"nextTry,omitzero"`
	// Run-to-completion pods: the sandbox's address and the runs of
	// their containers.
	PodIP      string         `json:"podIP,omitempty"`
	Containers []containerRun `json:"containers,omitempty"`
}

func (s *syncer) recordPath(uid types.UID) string {
	return filepath.Join(s.o.StateDir, string(uid)+".json")
}

func (s *syncer) load(pod *corev1.Pod) record {
	r := record{UID: pod.UID, Namespace: pod.Namespace, Name: pod.Name}
	if data, err := os.ReadFile(s.recordPath(pod.UID)); err == nil {
		_ = json.Unmarshal(data, &r)
	}
	return r
}

func (s *syncer) save(r record) error {
	if err := os.MkdirAll(s.o.StateDir, 0o700); err != nil {
		return err
	}
	data, _ := json.Marshal(r)
	tmp := s.recordPath(r.UID) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.recordPath(r.UID))
}

func (s *syncer) sync(ctx context.Context) error {
	node, ok, err := s.o.API.Node(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return nil // not registered (yet, or again)
	}
	if cidr := node.Spec.PodCIDR; cidr != "" && cidr != s.podCIDR {
		// As the kubelet does: the runtime's CNI allocates from it.
		if _, err := s.o.Runtime.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{RuntimeConfig: &runtimeapi.RuntimeConfig{
			NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: cidr}}}); err != nil {
			return fmt.Errorf("passing pod CIDR %s to the runtime: %w", cidr, err)
		}
		s.podCIDR = cidr
	}
	list, err := s.o.API.Pods(ctx)
	if err != nil {
		return err
	}
	live := map[types.UID]bool{}
	var errs []string
	for i := range list {
		pod := &list[i]
		if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
			continue
		}
		live[pod.UID] = true
		if err := s.syncPod(ctx, pod); err != nil && ctx.Err() == nil {
			errs = append(errs, fmt.Sprintf("%s/%s: %v", pod.Namespace, pod.Name, err))
		}
	}
	if err := s.housekeeping(ctx, live); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// syncPod takes one pod a step towards running, as far as the node allows,
// and posts where it got.
func (s *syncer) syncPod(ctx context.Context, pod *corev1.Pod) error {
	if pod.DeletionTimestamp != nil {
		return s.kill(ctx, pod)
	}
	if runsToCompletion(pod) {
		return s.syncRunToCompletion(ctx, pod)
	}
	r := s.load(pod)
	v := View{NodeIP: s.o.NodeIP, Restarts: r.Restarts, LastExit: r.LastExit, Waiting: "ContainerCreating"}
	post := func() error { return s.post(ctx, pod, v) }
	if !r.Started.IsZero() {
		// Running: nothing to check again while its sandbox lives (a
		// running pod keeps running whatever happens to the network).
		if ip, ok, err := s.readySandbox(ctx, r.SandboxID); err != nil {
			return err
		} else if ok {
			v.Sandbox, v.PodIP, v.Started, v.Waiting = true, ip, r.Started, ""
			if pod.Spec.HostNetwork || ip == "" {
				v.PodIP = s.o.NodeIP
			}
			return post()
		}
	}

	lookup := s.lookup(ctx)
	if err := VolumeProblem(pod, lookup, s.o.Root); err != nil {
		s.event(ctx, pod, "FailedMount", err.Error())
		return post()
	}
	hostNetwork := pod.Spec.HostNetwork
	if err := s.o.NetworkError(); err != nil && !hostNetwork {
		s.event(ctx, pod, "NetworkNotReady", "network is not ready: "+err.Error())
		return post()
	}
	sb, ip, err := s.sandbox(ctx, pod, r)
	if err != nil {
		s.event(ctx, pod, "FailedCreatePodSandBox", "Failed to create pod sandbox: "+err.Error())
		return post()
	}
	if sb != r.SandboxID {
		// A new sandbox (first start, or after a reboot): its containers
		// start afresh.
		if r.SandboxID != "" && !r.Started.IsZero() {
			r.Restarts++
		}
		r.SandboxID, r.Started = sb, time.Time{}
		if err := s.save(r); err != nil {
			return err
		}
	}
	v.Sandbox, v.PodIP = true, ip
	if hostNetwork || ip == "" {
		v.PodIP = s.o.NodeIP
	}
	if !r.Started.IsZero() {
		v.Started, v.Waiting = r.Started, ""
		return post()
	}
	if err := ConfigProblem(pod, lookup); err != nil {
		v.Waiting, v.WaitingMessage = "CreateContainerConfigError", err.Error()
		s.event(ctx, pod, "Failed", "Error: "+err.Error())
		return post()
	}
	now := time.Now()
	if now.Before(r.NextTry) {
		v.Waiting = "CrashLoopBackOff"
		v.WaitingMessage = fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", backoff(r.Restarts), pod.Spec.Containers[0].Name, pod.Name, pod.Namespace, pod.UID)
		return post()
	}
	for _, a := range s.o.Agents {
		if !a.Match(pod) {
			continue
		}
		if err := a.Start(ctx, pod); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			r.Restarts++
			r.LastExit = err.Error()
			r.NextTry = now.Add(backoff(r.Restarts))
			s.o.Logf("pod %s/%s: container %s exited: %v", pod.Namespace, pod.Name, pod.Spec.Containers[0].Name, err)
			if err := s.save(r); err != nil {
				return err
			}
			v.Restarts, v.LastExit, v.Waiting = r.Restarts, r.LastExit, "CrashLoopBackOff"
			s.event(ctx, pod, "BackOff", "Back-off restarting failed container "+pod.Spec.Containers[0].Name+" in pod "+pod.Name+"_"+pod.Namespace+"("+string(pod.UID)+")")
			return post()
		}
	}
	r.Started, r.NextTry = now, time.Time{}
	if err := s.save(r); err != nil {
		return err
	}
	v.Started, v.Waiting = r.Started, ""
	return post()
}

// readySandbox reports whether sandbox id is still ready, and its address.
func (s *syncer) readySandbox(ctx context.Context, id string) (string, bool, error) {
	if id == "" {
		return "", false, nil
	}
	st, err := s.o.Runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if status.Code(err) == codes.NotFound {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("sandbox status: %w", err)
	}
	if st.GetStatus().GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
		return "", false, nil
	}
	return st.GetStatus().GetNetwork().GetIp(), true, nil
}

// sandbox returns the pod's ready sandbox, asking the runtime for one when
// it has none, and its address.
func (s *syncer) sandbox(ctx context.Context, pod *corev1.Pod, r record) (id, ip string, err error) {
	l, err := s.o.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: map[string]string{labelPodUID: string(pod.UID)},
	}})
	if err != nil {
		return "", "", fmt.Errorf("listing sandboxes: %w", err)
	}
	for _, it := range l.Items {
		if it.Id == r.SandboxID || id == "" {
			id = it.Id
		}
	}
	if id == "" {
		handler := ""
		if rc := pod.Spec.RuntimeClassName; rc != nil && *rc != "" {
			c, err := s.client.NodeV1().RuntimeClasses().Get(ctx, *rc, metav1.GetOptions{})
			if err != nil {
				return "", "", err
			}
			handler = c.Handler
		}
		mode := runtimeapi.NamespaceMode_POD
		if pod.Spec.HostNetwork {
			mode = runtimeapi.NamespaceMode_NODE
		}
		labels := map[string]string{labelPodName: pod.Name, labelPodNamespace: pod.Namespace, labelPodUID: string(pod.UID)}
		for k, v := range pod.Labels {
			labels[k] = v
		}
		resp, err := s.o.Runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{RuntimeHandler: handler, Config: &runtimeapi.PodSandboxConfig{
			Metadata:    &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID)},
			Hostname:    pod.Name,
			Labels:      labels,
			Annotations: pod.Annotations,
			Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: mode, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}}},
		}})
		if err != nil {
			return "", "", fmt.Errorf("rpc error: code = %s desc = %s", status.Code(err), status.Convert(err).Message())
		}
		id = resp.PodSandboxId
	}
	st, err := s.o.Runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if err != nil {
		return "", "", fmt.Errorf("sandbox status: %w", err)
	}
	return id, st.GetStatus().GetNetwork().GetIp(), nil
}

func (s *syncer) lookup(ctx context.Context) Lookup {
	return func(kind, ns, name string) (bool, error) {
		var err error
		switch kind {
		case "configmap":
			_, err = s.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		case "secret":
			_, err = s.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		default:
			return false, fmt.Errorf("unknown kind %s", kind)
		}
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}
}

// post writes the pod's status when its view changed since the last post.
func (s *syncer) post(ctx context.Context, pod *corev1.Pod, v View) error {
	return s.postStatus(ctx, pod, fmt.Sprintf("%+v", v), func(now time.Time) corev1.PodStatus { return Status(pod, v, now) })
}

// postStatus writes the pod's status, status(now), unless key is what
// was last posted for the pod and the API's conditions still say what it
// posted (ConditionsDiffer). A stale write is no error, and leaves key
// unnoted so the next sync posts again.
func (s *syncer) postStatus(ctx context.Context, pod *corev1.Pod, key string, status func(now time.Time) corev1.PodStatus) error {
	want := status(time.Now())
	if s.posted[pod.UID] == key && !ConditionsDiffer(pod.Status.Conditions, want.Conditions) {
		return nil
	}
	p := pod.DeepCopy()
	p.Status = want
	if err := s.update(ctx, p); err != nil {
		if errors.Is(err, errStale) {
			return nil
		}
		return err
	}
	s.posted[pod.UID] = key
	return nil
}

// update writes p's status. A conflict or a pod gone is no error: the
// next sync sees the new version, and posts again (nothing is noted as
// posted).
func (s *syncer) update(ctx context.Context, p *corev1.Pod) error {
	if _, err := s.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return errStale
		}
		return err
	}
	return nil
}

var errStale = errors.New("stale")

// kill ends a pod being deleted: its sandbox goes, then (nothing left
// running) the pod object, as the kubelet finishes a graceful deletion.
func (s *syncer) kill(ctx context.Context, pod *corev1.Pod) error {
	s.stopContainers(s.load(pod))
	if err := s.removeSandboxes(ctx, string(pod.UID)); err != nil {
		return err
	}
	_ = os.RemoveAll(s.runDir(string(pod.UID)))
	_ = os.Remove(s.recordPath(pod.UID))
	uid := pod.UID
	err := s.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	delete(s.posted, pod.UID)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}

func (s *syncer) removeSandboxes(ctx context.Context, uid string) error {
	l, err := s.o.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{labelPodUID: uid}}})
	if err != nil {
		return err
	}
	for _, it := range l.Items {
		if _, err := s.o.Runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: it.Id}); err != nil {
			return err
		}
		if _, err := s.o.Runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: it.Id}); err != nil {
			return err
		}
	}
	return nil
}

// housekeeping removes the sandboxes and records of pods no longer bound
// to the node (deleted while the kubelet was down, say).
func (s *syncer) housekeeping(ctx context.Context, live map[types.UID]bool) error {
	l, err := s.o.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return err
	}
	for _, it := range l.Items {
		uid := it.Labels[labelPodUID]
		if uid != "" && !live[types.UID(uid)] {
			if err := s.removeSandboxes(ctx, uid); err != nil {
				return err
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join(s.o.StateDir, "*.json"))
	for _, f := range files {
		if uid := types.UID(strings.TrimSuffix(filepath.Base(f), ".json")); !live[uid] {
			var r record
			if data, err := os.ReadFile(f); err == nil && json.Unmarshal(data, &r) == nil {
				s.stopContainers(r)
			}
			_ = os.RemoveAll(s.runDir(string(uid)))
			_ = os.Remove(f)
			delete(s.posted, uid)
		}
	}
	for key := range s.events {
		if uid, _, _ := strings.Cut(key, "|"); !live[types.UID(uid)] {
			delete(s.events, key)
		}
	}
	return nil
}

// event records a Warning on the pod once per reason and message, as the
// kubelet's recorder would (without its counting).
func (s *syncer) event(ctx context.Context, pod *corev1.Pod, reason, msg string) {
	key := string(pod.UID) + "|" + reason + "|" + msg
	if s.events[key] {
		return
	}
	now := metav1.Now()
	_, err := s.client.CoreV1().Events(pod.Namespace).Create(ctx, &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{GenerateName: pod.Name + ".", Namespace: pod.Namespace},
		InvolvedObject:      corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Reason:              reason,
		Message:             msg,
		Type:                corev1.EventTypeWarning,
		Source:              corev1.EventSource{Component: "kubelet", Host: s.o.NodeName},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		ReportingController: "kubelet",
		ReportingInstance:   s.o.NodeName,
	}, metav1.CreateOptions{})
	if err == nil {
		s.events[key] = true
		s.o.Logf("pod %s/%s: %s: %s", pod.Namespace, pod.Name, reason, msg)
	}
}
