// Package apiview is the kubelet stand-in's view of the API: its own Node
// and the pods bound to it. The kubelet watches both (field-selected
// informers) and works from that cache. Polling them instead cost the lab
// a GET of the Node (a quorum read through etcd) and a LIST of pods every
// second per node: the idle 7-node lab took 0.73 of two cores polling,
// 0.54 watching.
package apiview

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Source is what one sync reads of the API.
type Source interface {
	// Node is the node's Node object; false when it is not registered
	// (yet, or again).
	Node(ctx context.Context) (*corev1.Node, bool, error)
	// Pods are the pods bound to the node. They are the caller's to
	// change.
	Pods(ctx context.Context) ([]corev1.Pod, error)
}

// ErrNotSynced is Watch's answer before its first complete list: acting
// on an empty cache would take every pod of the node for deleted.
var ErrNotSynced = errors.New("the API view has not listed the node and its pods yet")

// Watch is the kubelet's way: one informer on the Node, one on its pods,
// each with the field selector the kubelet uses.
type Watch struct {
	node, pods cache.SharedIndexInformer
	name       string

	mu   sync.Mutex
	subs []chan struct{}
}

var _ Source = (*Watch)(nil)

// Start watches node's Node and pods until ctx ends. Watches broken by the
// API going away (the VIP moving, an apiserver restarting) are resumed by
// the informers' own re-list and back-off, as the kubelet's are.
func Start(ctx context.Context, client kubernetes.Interface, node string) *Watch {
	w := &Watch{
		name: node,
		node: coreinformers.NewFilteredNodeInformer(client, 0, cache.Indexers{}, func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", node).String()
		}),
		pods: coreinformers.NewFilteredPodInformer(client, metav1.NamespaceAll, 0, cache.Indexers{}, func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
		}),
	}
	notify := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.notify() },
		UpdateFunc: func(any, any) { w.notify() },
		DeleteFunc: func(any) { w.notify() },
	}
	w.node.AddEventHandler(notify)
	w.pods.AddEventHandler(notify)
	go w.node.RunWithContext(ctx)
	go w.pods.RunWithContext(ctx)
	return w
}

// Changed returns a channel that receives when the Node or a pod changed
// (at most one pending signal): a sync can start at once instead of at
// its next tick.
func (w *Watch) Changed() <-chan struct{} {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	w.subs = append(w.subs, ch)
	w.mu.Unlock()
	return ch
}

func (w *Watch) notify() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range w.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (w *Watch) synced() bool { return w.node.HasSynced() && w.pods.HasSynced() }

// Node is the cached Node.
func (w *Watch) Node(context.Context) (*corev1.Node, bool, error) {
	if !w.synced() {
		return nil, false, ErrNotSynced
	}
	for _, obj := range w.node.GetStore().List() {
		// A fake clientset ignores field selectors: match the name too.
		if n, ok := obj.(*corev1.Node); ok && n.Name == w.name {
			return n.DeepCopy(), true, nil
		}
	}
	return nil, false, nil
}

// Pods are the cached pods bound to the node, by namespace and name.
func (w *Watch) Pods(context.Context) ([]corev1.Pod, error) {
	if !w.synced() {
		return nil, ErrNotSynced
	}
	var out []corev1.Pod
	for _, obj := range w.pods.GetStore().List() {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName == w.name {
			out = append(out, *p.DeepCopy())
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// Poll reads the API on every call. Tests use it to drive one sync at a
// time against a fake clientset, with no informer to wait for.
type Poll struct {
	Client   kubernetes.Interface
	NodeName string
}

var _ Source = Poll{}

func (p Poll) Node(ctx context.Context) (*corev1.Node, bool, error) {
	n, err := p.Client.CoreV1().Nodes().Get(ctx, p.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("node: %w", err)
	}
	return n, true, nil
}

func (p Poll) Pods(ctx context.Context) ([]corev1.Pod, error) {
	list, err := p.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + p.NodeName})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}
