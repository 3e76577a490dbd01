package readiness

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name string, status corev1.ConditionStatus, reason, msg string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if status != "" {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: status, Reason: reason, Message: msg}}
	}
	return n
}

const noNetwork = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"

func TestNotReady(t *testing.T) {
	nodes := []corev1.Node{
		node("cp-1", corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
		node("gpu-1", corev1.ConditionFalse, "KubeletNotReady", noNetwork),
		node("gpu-2", corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status."),
		node("gpu-3", "", "", ""),
	}
	for name, want := range map[string]string{
		"cp-1":  "",
		"gpu-1": "Ready=False (KubeletNotReady): " + noNetwork,
		"gpu-2": "Ready=Unknown (NodeStatusUnknown): Kubelet stopped posting node status.",
		"gpu-3": "no Ready condition posted yet",
		"gpu-4": "not registered",
	} {
		if got := NotReady(nodes, name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if !NoNetwork(NotReady(nodes, "gpu-1")) || NoNetwork(NotReady(nodes, "gpu-2")) {
		t.Error("NoNetwork misreads the kubelet's messages")
	}
}
