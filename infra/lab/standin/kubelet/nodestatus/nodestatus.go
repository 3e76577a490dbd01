// Package nodestatus registers the node with the API and keeps it alive
// there the way the kubelet does: a node status posted every
// StatusInterval (and at once when readiness changes), whose Ready
// condition follows the container runtime as the kubelet's does (Ready),
// and a Lease in kube-node-lease renewed every quarter of its duration.
package nodestatus

import (
	"context"
	"fmt"
	"log"
	"maps"
	"reflect"
	"runtime"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// KubeletVersion is what the stand-in claims to be. The lab's kubelet
// packages link it as their version (VersionFlag), as a real kubelet
// carries the version it was built as.
var KubeletVersion = "v1.34.4"

// VersionFlag is the linker flag that builds the stand-in as version v.
func VersionFlag(v string) string {
	return "-X " + reflect.TypeOf(Options{}).PkgPath() + ".KubeletVersion=" + v
}

// Options describe the node.
type Options struct {
	NodeName string
	NodeIP   string
	// Labels are added at registration only, like --node-labels.
	Labels map[string]string
	Taints []corev1.Taint
	// StatusInterval is the heartbeat period (default 10 s).
	StatusInterval time.Duration
	// LeaseDuration is the Lease's duration (default 40 s); it is renewed
	// every quarter of it.
	LeaseDuration time.Duration
	// RuntimeVersion returns the container runtime as "name://version".
	RuntimeVersion func(context.Context) string
	// Runtime returns what the runtime last reported; the Ready condition
	// is derived from it.
	Runtime func() Runtime
	// Changed signals that Runtime's answer changed: the status is posted
	// at once rather than at the next interval.
	Changed <-chan struct{}
	Machine Machine
	Logf    func(format string, args ...any)
}

// Run registers the node and keeps its status and lease fresh until ctx
// ends. It retries everything: the API may come and go.
func Run(ctx context.Context, client kubernetes.Interface, o Options) {
	if o.StatusInterval <= 0 {
		o.StatusInterval = 10 * time.Second
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = 40 * time.Second
	}
	if o.Logf == nil {
		o.Logf = log.Printf
	}
	k := &keeper{client: client, o: o}
	statusTick := time.NewTicker(o.StatusInterval)
	defer statusTick.Stop()
	leaseTick := time.NewTicker(o.LeaseDuration / 4)
	defer leaseTick.Stop()
	for {
		if k.node == nil {
			k.note("register", k.register(ctx))
		}
		if k.node != nil {
			k.note("status", k.updateStatus(ctx))
			k.note("lease", k.renewLease(ctx))
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-statusTick.C:
			k.note("status", k.updateStatus(ctx))
		case <-o.Changed:
			k.note("status", k.updateStatus(ctx))
		case <-leaseTick.C:
			k.note("lease", k.renewLease(ctx))
		}
	}
}

type keeper struct {
	client kubernetes.Interface
	o      Options
	node   *corev1.Node // as last seen by the API
	errs   map[string]string
}

// note logs an error once, and its recovery once.
func (k *keeper) note(what string, err error) {
	if k.errs == nil {
		k.errs = map[string]string{}
	}
	prev, had := k.errs[what]
	switch {
	case err != nil && err.Error() != prev:
		k.o.Logf("node %s: %s: %v", k.o.NodeName, what, err)
		k.errs[what] = err.Error()
	case err == nil && had:
		k.o.Logf("node %s: %s: ok again", k.o.NodeName, what)
		delete(k.errs, what)
	}
}

func (k *keeper) defaultLabels() map[string]string {
	return map[string]string{
		corev1.LabelHostname:   k.o.NodeName,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: runtime.GOARCH,
	}
}

// register creates the Node, or takes over an existing one as the kubelet
// does on restart (fixing its default labels, not re-applying --node-labels).
func (k *keeper) register(ctx context.Context) error {
	nodes := k.client.CoreV1().Nodes()
	n, err := nodes.Get(ctx, k.o.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		labels := maps.Clone(k.o.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		maps.Copy(labels, k.defaultLabels())
		n = &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        k.o.NodeName,
				Labels:      labels,
				Annotations: map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"},
			},
			Spec: corev1.NodeSpec{Taints: k.o.Taints},
		}
		k.setStatus(ctx, n)
		created, err := nodes.Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		k.o.Logf("node %s: registered", k.o.NodeName)
		k.node = created
		return nil
	}
	if err != nil {
		return err
	}
	want := k.defaultLabels()
	fix := false
	for key, v := range want {
		if n.Labels[key] != v {
			fix = true
		}
	}
	if fix {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		maps.Copy(n.Labels, want)
		if n, err = nodes.Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	k.o.Logf("node %s: already registered, taking it over", k.o.NodeName)
	k.node = n
	return nil
}

func (k *keeper) updateStatus(ctx context.Context) error {
	nodes := k.client.CoreV1().Nodes()
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		n, err := nodes.Get(ctx, k.o.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			k.o.Logf("node %s: deleted from the API, registering again", k.o.NodeName)
			k.node = nil
			return k.register(ctx)
		}
		if err != nil {
			return err
		}
		k.setStatus(ctx, n)
		n, err = nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{})
		if err == nil {
			k.node = n
		}
		return err
	})
}

func (k *keeper) setStatus(ctx context.Context, n *corev1.Node) {
	now := metav1.Now()
	m := k.o.Machine
	n.Status.Capacity = m.Capacity
	n.Status.Allocatable = m.Allocatable
	n.Status.Addresses = nil
	if k.o.NodeIP != "" {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: k.o.NodeIP})
	}
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: k.o.NodeName})
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = 10250
	info := m.Info
	info.KubeletVersion = KubeletVersion
	info.OperatingSystem = "linux"
	info.Architecture = runtime.GOARCH
	if k.o.RuntimeVersion != nil {
		info.ContainerRuntimeVersion = k.o.RuntimeVersion(ctx)
	}
	n.Status.NodeInfo = info
	setCondition(n, corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available", now)
	setCondition(n, corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure", now)
	setCondition(n, corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available", now)
	var rt Runtime
	if k.o.Runtime != nil {
		rt = k.o.Runtime()
	}
	status, reason, msg := Ready(rt, now.Time)
	setCondition(n, corev1.NodeReady, status, reason, msg, now)
}

// setCondition refreshes the heartbeat and keeps the transition time while
// the status stays the same.
func setCondition(n *corev1.Node, t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string, now metav1.Time) {
	for i := range n.Status.Conditions {
		c := &n.Status.Conditions[i]
		if c.Type != t {
			continue
		}
		if c.Status != s {
			c.LastTransitionTime = now
		}
		c.Status, c.Reason, c.Message, c.LastHeartbeatTime = s, reason, msg, now
		return
	}
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{
		Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now,
	})
}

func (k *keeper) renewLease(ctx context.Context) error {
	if k.node == nil {
		return fmt.Errorf("node not registered")
	}
	leases := k.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	owner := []metav1.OwnerReference{{
		APIVersion: "v1",
		Kind:       "Node",
		Name:       k.node.Name,
		UID:        k.node.UID,
	}}
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		now := metav1.NewMicroTime(time.Now())
		l, err := leases.Get(ctx, k.o.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			l = &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: k.o.NodeName, Namespace: corev1.NamespaceNodeLease, OwnerReferences: owner},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity:       ptr.To(k.o.NodeName),
					LeaseDurationSeconds: ptr.To(int32(k.o.LeaseDuration / time.Second)),
					RenewTime:            &now,
				},
			}
			_, err = leases.Create(ctx, l, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		l.Spec.HolderIdentity = ptr.To(k.o.NodeName)
		l.Spec.LeaseDurationSeconds = ptr.To(int32(k.o.LeaseDuration / time.Second))
		l.Spec.RenewTime = &now
		// A Node registered again has a new UID; the lease must follow it
		// or the garbage collector removes it.
		l.OwnerReferences = owner
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		return err
	})
}
