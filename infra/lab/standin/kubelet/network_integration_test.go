package kubelet_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// waitNodeCondition waits for the Node's Ready condition to have status
// and message.
func (e *env) waitNodeCondition(name string, status corev1.ConditionStatus, message string) {
	waitFor(e.t, "Node "+name+" Ready="+string(status), 60*time.Second, func() error {
		n, err := e.admin.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status != status || c.Message != message {
					return fmt.Errorf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
				}
				return nil
			}
		}
		return fmt.Errorf("no Ready condition")
	})
}

func (e *env) pod(ns, name string) (*corev1.Pod, error) {
	return e.admin.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue && p.Status.Phase == corev1.PodRunning
		}
	}
	return false
}

// checkPodsAndNetwork: on a node without a pod network, a host-network pod
// runs and a pod-network one waits (an event names the network); a
// DaemonSet's Cilium agent pod runs, writes the CNI configuration and the
// plugin, the Node turns Ready, and the waiting pod gets an address from
// the node's pod CIDR. A deleted pod is finished by the kubelet.
func (e *env) checkPodsAndNetwork(node nodeDirs) {
	t := e.t
	ctx := context.Background()
	mk := func(name string, hostNetwork bool) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: "itest-a", HostNetwork: hostNetwork,
				Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10.1"}}},
		}
		if _, err := e.admin.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The namespace's default ServiceAccount comes from the controller-manager.
	waitFor(t, "ServiceAccount default/default", 30*time.Second, func() error {
		_, err := e.admin.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	mk("hostnet", true)
	mk("web", false)
	waitFor(t, "host-network pod Running", 30*time.Second, func() error {
		p, err := e.pod("default", "hostnet")
		if err != nil {
			return err
		}
		if !podReady(p) || p.Status.PodIP != nodeIP {
			return fmt.Errorf("status %s %s", p.Status.Phase, p.Status.PodIP)
		}
		return nil
	})
	waitFor(t, "the pod-network pod's NetworkNotReady event", 30*time.Second, func() error {
		l, err := e.admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web"})
		if err != nil {
			return err
		}
		for _, ev := range l.Items {
			if ev.Reason == "NetworkNotReady" && strings.Contains(ev.Message, "cni plugin not initialized") {
				return nil
			}
		}
		return fmt.Errorf("events %v", l.Items)
	})
	if p, err := e.pod("default", "web"); err != nil || p.Status.Phase != corev1.PodPending || podReady(p) {
		t.Fatalf("the pod-network pod on a node without a network: %+v %v", p.Status, err)
	}

	// Cilium's DaemonSet, as its chart shapes it where the stand-in looks.
	_, err := e.admin.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cilium-config", Namespace: "kube-system"},
		Data:       map[string]string{"k8s-service-host": "127.0.0.1", "k8s-service-port": "6443", "write-cni-conf-when-ready": "/host/etc/cni/net.d/05-cilium.conflist"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"k8s-app": "cilium"}
	_, err = e.admin.AppsV1().DaemonSets("kube-system").Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "cilium", Namespace: "kube-system", Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					HostNetwork: true,
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers:  []corev1.Container{{Name: "cilium-agent", Image: "quay.io/cilium/cilium:v1.18.4"}},
					Volumes: []corev1.Volume{{Name: "cilium-config-path", VolumeSource: corev1.VolumeSource{
						ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cilium-config"}}}}},
				},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the Cilium agent stand-in's CNI configuration", 60*time.Second, func() error {
		_, err := os.Stat(filepath.Join(node.root, "etc/cni/net.d/05-cilium.conflist"))
		return err
	})
	if st, err := os.Stat(filepath.Join(node.root, "opt/cni/bin/cilium-cni")); err != nil || st.Mode()&0o111 == 0 {
		t.Errorf("cilium-cni plugin: %v %v", st, err)
	}
	e.waitNodeCondition("itest-a", corev1.ConditionTrue, "kubelet is posting ready status")
	var cidr *net.IPNet
	waitFor(t, "the pod-network pod Running with an address of the node's pod CIDR", 60*time.Second, func() error {
		n, err := e.admin.CoreV1().Nodes().Get(ctx, "itest-a", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, cidr, err = net.ParseCIDR(n.Spec.PodCIDR); err != nil {
			return fmt.Errorf("pod CIDR %q", n.Spec.PodCIDR)
		}
		p, err := e.pod("default", "web")
		if err != nil {
			return err
		}
		if !podReady(p) || !cidr.Contains(net.ParseIP(p.Status.PodIP)) {
			return fmt.Errorf("status %s %s (pod CIDR %s)", p.Status.Phase, p.Status.PodIP, cidr)
		}
		return nil
	})
	if err := e.admin.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted pod gone", 30*time.Second, func() error {
		if _, err := e.pod("default", "web"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
}
