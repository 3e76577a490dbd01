package provider

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

func readyDaemonSet(name string, n int32) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", Generation: 1},
		Status:     appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: n, UpdatedNumberScheduled: n, NumberReady: n},
	}
}

func statusPod(name, app, node string, ready bool, waiting string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", Labels: map[string]string{"k8s-app": app}},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}}
	if waiting != "" {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: app, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: waiting}}}}
	}
	return p
}

// A crash-looping kube-proxy leaves every Node Ready and Cilium happy,
// yet no Service answers on that node: while kube-proxy serves Services,
// the network is up only when its pod is ready on every node, and the
// problem names the node and the container's state.
func TestNetworkStatusNamesABrokenKubeProxy(t *testing.T) {
	objs := []runtime.Object{readyDaemonSet("cilium", 2), readyDaemonSet("kube-proxy", 2)}
	for _, n := range []string{"cp-1", "gpu-1"} {
		objs = append(objs,
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}},
			statusPod("cilium-"+n, "cilium", n, true, ""))
	}
	objs = append(objs, statusPod("kube-proxy-a", "kube-proxy", "cp-1", true, ""), statusPod("kube-proxy-b", "kube-proxy", "gpu-1", false, "CrashLoopBackOff"))
	cs := fake.NewClientset(objs...)
	want := []string{"cp-1", "gpu-1"}

	problems, err := networkStatus(context.Background(), cs, "kube-system", want, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || !strings.Contains(problems[0], "gpu-1") || !strings.Contains(problems[0], "CrashLoopBackOff") {
		t.Errorf("problems = %q, want gpu-1's kube-proxy named with its state", problems)
	}
	// With Cilium's replacement nothing of kube-proxy is looked at.
	if problems, err := networkStatus(context.Background(), cs, "kube-system", want, false); err != nil || len(problems) != 0 {
		t.Errorf("replacement: problems = %q, %v", problems, err)
	}
	// A node with no kube-proxy pod at all.
	if err := cs.CoreV1().Pods("kube-system").Delete(context.Background(), "kube-proxy-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	problems, _ = networkStatus(context.Background(), cs, "kube-system", want, true)
	if len(problems) != 2 || !strings.Contains(strings.Join(problems, "\n"), "cp-1: no kube-proxy pod") {
		t.Errorf("problems = %q", problems)
	}
}
