// Package mirror keeps a mirror pod in the API for every static pod the
// kubelet stand-in runs, as the kubelet does. kubeadm depends on them: it
// finds the etcd endpoints for `join --control-plane` and `reset` in the
// etcd pods' annotations, the API endpoint of a node in its kube-apiserver
// pod, and during `upgrade` it waits for the kubernetes.io/config.hash
// annotation to change.
package mirror

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log"
	"maps"
	"path"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/homelab-dev/homelab/infra/lab/standin/kubelet/apiview"
	"github.com/homelab-dev/homelab/infra/lab/standin/kubelet/pods"
	"github.com/homelab-dev/homelab/infra/lab/standin/kubelet/staticpod"
)

const (
	hashAnnotation   = "kubernetes.io/config.hash"
	sourceAnnotation = "kubernetes.io/config.source"
	seenAnnotation   = "kubernetes.io/config.seen"
)

// Options for Run.
type Options struct {
	NodeName string
	NodeIP   string
	// Interval between syncs (default 2 s).
	Interval time.Duration
	// Pods returns the static pods as the supervisor sees them.
	Pods func() []staticpod.PodState
	// API is where the Node and its pods are read (nil: polled with the
	// client on every sync); Changed, when set, starts a sync at once.
	API     apiview.Source
	Changed <-chan struct{}
	Logf    func(format string, args ...any)
}

// Run syncs the mirror pods until ctx ends.
func Run(ctx context.Context, client kubernetes.Interface, o Options) {
	if o.Interval <= 0 {
		o.Interval = 2 * time.Second
	}
	if o.Logf == nil {
		o.Logf = log.Printf
	}
	if o.API == nil {
		o.API = apiview.Poll{Client: client, NodeName: o.NodeName}
	}
	s := &syncer{client: client, o: o, posted: map[types.UID]string{}}
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	var lastErr string
	for {
		err := s.sync(ctx)
		switch {
		case err != nil && err.Error() != lastErr && ctx.Err() == nil:
			o.Logf("mirror pods: %v", err)
			lastErr = err.Error()
		case err == nil && lastErr != "":
			o.Logf("mirror pods: ok again")
			lastErr = ""
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-o.Changed:
		}
	}
}

type syncer struct {
	client kubernetes.Interface
	o      Options
	// posted remembers the status last written per mirror pod, so that
	// unchanged pods cost no writes.
	posted map[types.UID]string
}

func (s *syncer) sync(ctx context.Context) error {
	node, ok, err := s.o.API.Node(ctx)
	if err != nil {
		return err
	}
	if !ok {
		// Mirror pods are owned by the Node: nothing to do before it is
		// registered (again).
		return nil
	}
	list, err := s.o.API.Pods(ctx)
	if err != nil {
		return err
	}
	existing := map[string]*corev1.Pod{}
	for i := range list {
		p := &list[i]
		if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
			existing[p.Namespace+"/"+p.Name] = p
		}
	}
	var errs []string
	for _, st := range s.o.Pods() {
		ns, name := s.mirrorName(st.Spec)
		key := ns + "/" + name
		cur := existing[key]
		delete(existing, key)
		if cur != nil && (cur.Annotations[corev1.MirrorPodAnnotationKey] != st.Spec.Hash || !ownedBy(cur, node)) {
			if err := s.remove(ctx, cur); err != nil {
				errs = append(errs, err.Error())
				continue
			}
			cur = nil
		}
		if cur == nil {
			created, err := s.client.CoreV1().Pods(ns).Create(ctx, s.build(st, ns, name, node), metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue // created by the last sync, not yet in the view
			}
			if err != nil {
				errs = append(errs, fmt.Sprintf("create %s: %v", key, err))
				continue
			}
			cur = created
		}
		if err := s.postStatus(ctx, cur, st); err != nil {
			errs = append(errs, fmt.Sprintf("status of %s: %v", key, err))
		}
	}
	for _, p := range existing {
		if err := s.remove(ctx, p); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func (s *syncer) mirrorName(spec *staticpod.Spec) (ns, name string) {
	ns = spec.Pod.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	return ns, spec.Name + "-" + s.o.NodeName
}

func ownedBy(p *corev1.Pod, node *corev1.Node) bool {
	for _, r := range p.OwnerReferences {
		if r.Kind == "Node" && r.UID == node.UID {
			return true
		}
	}
	return false
}

func (s *syncer) remove(ctx context.Context, p *corev1.Pod) error {
	uid := p.UID
	err := s.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	delete(s.posted, uid)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

func (s *syncer) build(st staticpod.PodState, ns, name string, node *corev1.Node) *corev1.Pod {
	p := st.Spec.Pod.DeepCopy()
	p.ObjectMeta = metav1.ObjectMeta{
		Name:        name,
		Namespace:   ns,
		Labels:      p.Labels,
		Annotations: maps.Clone(p.Annotations),
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1",
			Kind:       "Node",
			Name:       node.Name,
			UID:        node.UID,
			Controller: ptr.To(true),
		}},
	}
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[corev1.MirrorPodAnnotationKey] = st.Spec.Hash
	p.Annotations[hashAnnotation] = st.Spec.Hash
	p.Annotations[sourceAnnotation] = "file"
	p.Annotations[seenAnnotation] = time.Now().Format(time.RFC3339Nano)
	p.Spec.NodeName = s.o.NodeName
	p.Status = corev1.PodStatus{}
	return p
}

func (s *syncer) postStatus(ctx context.Context, p *corev1.Pod, st staticpod.PodState) error {
	key := fmt.Sprintf("%s|%t|%d|%d|%s", st.Spec.Hash, st.Running, st.PID, st.Restarts, st.LastExit)
	want := s.status(p, st)
	if s.posted[p.UID] == key && !pods.ConditionsDiffer(p.Status.Conditions, want.Conditions) {
		return nil
	}
	p = p.DeepCopy()
	p.Status = want
	if _, err := s.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) {
			// The view lags the write before: the next sync posts again.
			return nil
		}
		return err
	}
	s.posted[p.UID] = key
	return nil
}

// status describes the process as the pod's containers. All containers
// share the one process: only the first container's command runs.
func (s *syncer) status(p *corev1.Pod, st staticpod.PodState) corev1.PodStatus {
	now := metav1.Now()
	old := p.Status
	out := corev1.PodStatus{
		Phase:    corev1.PodPending,
		QOSClass: old.QOSClass,
		HostIP:   s.o.NodeIP,
		PodIP:    s.o.NodeIP,
	}
	if s.o.NodeIP != "" {
		out.HostIPs = []corev1.HostIP{{IP: s.o.NodeIP}}
		out.PodIPs = []corev1.PodIP{{IP: s.o.NodeIP}}
	}
	started := st.Started
	if old.StartTime != nil {
		out.StartTime = old.StartTime
	} else if !started.IsZero() {
		out.StartTime = &metav1.Time{Time: started}
	} else {
		out.StartTime = &now
	}
	if st.Running || st.Restarts > 0 {
		// Restart policy Always: a crash-looping pod stays Running.
		out.Phase = corev1.PodRunning
	}
	ready := corev1.ConditionFalse
	if st.Running {
		ready = corev1.ConditionTrue
	}
	cond := func(t corev1.PodConditionType, v corev1.ConditionStatus) corev1.PodCondition {
		c := corev1.PodCondition{Type: t, Status: v, LastTransitionTime: now}
		for _, o := range old.Conditions {
			if o.Type == t && o.Status == v {
				c.LastTransitionTime = o.LastTransitionTime
			}
		}
		if v != corev1.ConditionTrue {
			c.Reason = "ContainersNotReady"
		}
		return c
	}
	out.Conditions = []corev1.PodCondition{
		cond(corev1.PodReadyToStartContainers, corev1.ConditionTrue),
		cond(corev1.PodInitialized, corev1.ConditionTrue),
		cond(corev1.PodReady, ready),
		cond(corev1.ContainersReady, ready),
		cond(corev1.PodScheduled, corev1.ConditionTrue),
	}
	for _, c := range p.Spec.InitContainers {
		out.InitContainerStatuses = append(out.InitContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: imageID(c.Image), Ready: true,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}},
		})
	}
	for _, c := range p.Spec.Containers {
		cs := corev1.ContainerStatus{
			Name:         c.Name,
			Image:        c.Image,
			ImageID:      imageID(c.Image),
			Ready:        st.Running,
			Started:      ptr.To(st.Running),
			RestartCount: int32(st.Restarts),
		}
		if st.Running {
			sum := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%d", p.Name, c.Name, st.PID))
			cs.ContainerID = "containerd://" + hex.EncodeToString(sum[:])
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.Time{Time: started}}
		} else {
			reason := "ContainerCreating"
			if st.Restarts > 0 {
				reason = "CrashLoopBackOff"
			}
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: st.LastExit}
		}
		if st.LastExit != "" {
			cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: st.LastExit}
		}
		out.ContainerStatuses = append(out.ContainerStatuses, cs)
	}
	return out
}

// imageID makes up the digest reference a runtime would report.
func imageID(image string) string {
	repo, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	if path.Base(repo) == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(image))
	return repo + "@sha256:" + hex.EncodeToString(sum[:])
}
