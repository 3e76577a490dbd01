package apiview

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func pod(ns, name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{NodeName: node}}
}

// names waits until the view's pods are want (their names), or fails.
func names(t *testing.T, w *Watch, changed <-chan struct{}, want ...string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	var got []string
	for {
		pods, err := w.Pods(context.Background())
		got = got[:0]
		for _, p := range pods {
			got = append(got, p.Namespace+"/"+p.Name)
		}
		if err == nil && slices.Equal(got, want) {
			return
		}
		select {
		case <-changed:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("pods %v (err %v), want %v", got, err, want)
		}
	}
}

func TestWatchSeesItsNodeAndPodsOnly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", UID: "u1"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-2", UID: "u2"}},
		pod("kube-system", "b", "gpu-1"), pod("default", "a", "gpu-1"), pod("default", "other", "gpu-2"),
	)
	w := Start(ctx, client, "gpu-1")
	changed := w.Changed()
	names(t, w, changed, "default/a", "kube-system/b")
	n, ok, err := w.Node(ctx)
	if err != nil || !ok || n.UID != "u1" {
		t.Fatalf("node %v %v %v", n, ok, err)
	}

	// What the node's syncs act on next: a new pod, a deleted one.
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod("default", "c", "gpu-1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Pods("default").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	names(t, w, changed, "default/c", "kube-system/b")

	// Copies: a sync changing what it got changes nothing in the view.
	pods, _ := w.Pods(ctx)
	pods[0].Status.Phase = corev1.PodRunning
	if again, _ := w.Pods(ctx); again[0].Status.Phase != "" {
		t.Error("Pods returned the cache's own object")
	}

	// A Node deleted (a node removed from the cluster) is not registered.
	// The fake clientset drops events sent before an informer's watch is
	// registered, which once took more than 10 s in CI: a Node still seen
	// after a second is created and deleted again, each a new event.
	if err := client.CoreV1().Nodes().Delete(ctx, "gpu-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	again := time.Now().Add(time.Second)
	for {
		if _, ok, err := w.Node(ctx); err == nil && !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the deleted Node is still in the view")
		}
		if time.Now().After(again) {
			again = time.Now().Add(time.Second)
			if _, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", UID: "u1"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := client.CoreV1().Nodes().Delete(ctx, "gpu-1", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Before its first list the view refuses to answer: an empty answer would
// read as "every pod of this node was deleted" and stop them all.
func TestWatchRefusesBeforeItListed(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"}}, pod("default", "a", "gpu-1"))
	// The pods' list hangs (an API that is not there yet).
	release := make(chan struct{})
	defer close(release)
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-release
		return false, nil, nil
	})
	w := Start(ctx, client, "gpu-1")
	time.Sleep(200 * time.Millisecond) // the Node's list has landed by now
	if _, err := w.Pods(context.Background()); err != ErrNotSynced {
		t.Errorf("Pods before a list: %v, want ErrNotSynced", err)
	}
	if _, _, err := w.Node(context.Background()); err != ErrNotSynced {
		t.Errorf("Node before a list: %v, want ErrNotSynced", err)
	}
}
