package nodestatus

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestReady(t *testing.T) {
	now := time.Now()
	ready := &RuntimeCondition{Type: "RuntimeReady", Status: true}
	netOK := &RuntimeCondition{Type: "NetworkReady", Status: true}
	netDown := &RuntimeCondition{Type: "NetworkReady", Status: false, Reason: "NetworkPluginNotReady", Message: "Network plugin returns error: cni plugin not initialized"}
	cases := []struct {
		name    string
		rt      Runtime
		status  corev1.ConditionStatus
		reason  string
		message string
	}{
		{"runtime and network ready", Runtime{LastSync: now, Answered: true, RuntimeReady: ready, NetworkReady: netOK},
			corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"},
		{"no CNI config yet", Runtime{LastSync: now, Answered: true, RuntimeReady: ready, NetworkReady: netDown},
			corev1.ConditionFalse, "KubeletNotReady", "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"},
		{"network not reported", Runtime{LastSync: now, Answered: true, RuntimeReady: ready},
			corev1.ConditionFalse, "KubeletNotReady", "container runtime network not ready: <nil>"},
		{"runtime never answered", Runtime{},
			corev1.ConditionFalse, "KubeletNotReady", "container runtime status check may not have completed yet"},
		{"runtime gone for a minute", Runtime{LastSync: now.Add(-time.Minute), Answered: true, RuntimeReady: ready, NetworkReady: netOK},
			corev1.ConditionFalse, "KubeletNotReady", "container runtime is down"},
		{"runtime not ready, network down", Runtime{LastSync: now.Add(-time.Minute), Answered: true,
			RuntimeReady: &RuntimeCondition{Type: "RuntimeReady", Reason: "X", Message: "y"}, NetworkReady: netDown},
			corev1.ConditionFalse, "KubeletNotReady", "[container runtime is down, container runtime not ready: RuntimeReady=false reason:X message:y, " +
				"container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized]"},
	}
	for _, tc := range cases {
		s, r, m := Ready(tc.rt, now)
		if s != tc.status || r != tc.reason || m != tc.message {
			t.Errorf("%s: %s %s %q\nwant %s %s %q", tc.name, s, r, m, tc.status, tc.reason, tc.message)
		}
	}
}
