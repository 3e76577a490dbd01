// Package readiness reads a Node's readiness as its kubelet reports it:
// one home for what the provisioner's waits, verify and doctor say about a
// node that is not Ready.
package readiness

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// NetworkNotReady is what the kubelet's Ready message holds while the
// container runtime has no pod network (no CNI configuration loaded).
const NetworkNotReady = "container runtime network not ready"

// Condition is a Node's Ready condition (nil: none posted yet).
func Condition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// NotReady says why the node named name is not Ready, in the Node's own
// words ("Ready=False (KubeletNotReady): container runtime network not
// ready: ..."); "" when it is Ready.
func NotReady(nodes []corev1.Node, name string) string {
	for i := range nodes {
		if nodes[i].Name == name {
			return Of(&nodes[i])
		}
	}
	return "not registered"
}

// Of is NotReady for one Node.
func Of(n *corev1.Node) string {
	c := Condition(n)
	switch {
	case c == nil:
		return "no Ready condition posted yet"
	case c.Status == corev1.ConditionTrue:
		return ""
	default:
		return fmt.Sprintf("Ready=%s (%s): %s", c.Status, c.Reason, c.Message)
	}
}

// NoNetwork reports whether a NotReady description says the node's runtime
// has no pod network.
func NoNetwork(why string) bool { return strings.Contains(why, NetworkNotReady) }
