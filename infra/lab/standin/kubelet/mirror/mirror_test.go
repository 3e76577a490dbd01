package mirror

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/homelab-dev/homelab/infra/lab/standin/kubelet/apiview"
	"github.com/homelab-dev/homelab/infra/lab/standin/kubelet/staticpod"
)

const manifest = `apiVersion: v1
kind: Pod
metadata:
  annotations:
    kubeadm.kubernetes.io/etcd.advertise-client-urls: https://10.0.0.11:2379
  labels: {component: etcd, tier: control-plane}
  name: etcd
  namespace: kube-system
spec:
  containers:
  - name: etcd
    image: registry.k8s.io/etcd:3.6.5-0
    command: [etcd, --name=cp1]
  hostNetwork: true
status: {}
`

func TestSync(t *testing.T) {
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp1", UID: "node-uid"}}
	client := fake.NewClientset(node)
	spec, err := staticpod.ParseManifest("/etc/kubernetes/manifests/etcd.yaml", []byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	state := []staticpod.PodState{{Spec: spec, Running: true, PID: 42, Started: time.Now()}}
	s := &syncer{client: client, posted: map[types.UID]string{}, o: Options{
		NodeName: "cp1", NodeIP: "10.0.0.11", API: apiview.Poll{Client: client, NodeName: "cp1"}, Pods: func() []staticpod.PodState { return state },
	}}
	if err := s.sync(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := client.CoreV1().Pods("kube-system").Get(ctx, "etcd-cp1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Annotations[corev1.MirrorPodAnnotationKey] != spec.Hash || p.Annotations["kubernetes.io/config.hash"] != spec.Hash ||
		p.Annotations["kubeadm.kubernetes.io/etcd.advertise-client-urls"] != "https://10.0.0.11:2379" {
		t.Errorf("annotations %v", p.Annotations)
	}
	if p.Spec.NodeName != "cp1" || len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != "node-uid" || !*p.OwnerReferences[0].Controller {
		t.Errorf("binding %q owners %+v", p.Spec.NodeName, p.OwnerReferences)
	}
	if p.Status.Phase != corev1.PodRunning || p.Status.PodIP != "10.0.0.11" || !p.Status.ContainerStatuses[0].Ready {
		t.Errorf("status %+v", p.Status)
	}

	// The node lifecycle controller marks a NotReady node's pods not
	// Ready: the next sync posts the kubelet's view again, as the
	// kubelet's status manager does.
	p.Status.Conditions = setCondition(p.Status.Conditions, corev1.PodReady, corev1.ConditionFalse)
	if _, err := client.CoreV1().Pods("kube-system").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.sync(ctx); err != nil {
		t.Fatal(err)
	}
	if p, _ = client.CoreV1().Pods("kube-system").Get(ctx, "etcd-cp1", metav1.GetOptions{}); condition(p.Status.Conditions, corev1.PodReady) != corev1.ConditionTrue {
		t.Errorf("Ready stays %s after the controller marked it", condition(p.Status.Conditions, corev1.PodReady))
	}

	// A changed manifest replaces the mirror pod.
	spec2, _ := staticpod.ParseManifest("/etc/kubernetes/manifests/etcd.yaml", []byte(manifest+"\n# changed\n"))
	state = []staticpod.PodState{{Spec: spec2, Running: false, Restarts: 2, LastExit: "exit status 1"}}
	if err := s.sync(ctx); err != nil {
		t.Fatal(err)
	}
	p2, err := client.CoreV1().Pods("kube-system").Get(ctx, "etcd-cp1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p2.Annotations["kubernetes.io/config.hash"] != spec2.Hash {
		t.Error("hash not updated")
	}
	if w := p2.Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "CrashLoopBackOff" || p2.Status.ContainerStatuses[0].RestartCount != 2 {
		t.Errorf("container status %+v", p2.Status.ContainerStatuses[0])
	}

	// A removed manifest removes it.
	state = nil
	if err := s.sync(ctx); err != nil {
		t.Fatal(err)
	}
	if l, _ := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); len(l.Items) != 0 {
		t.Errorf("pods left: %d", len(l.Items))
	}
}

func setCondition(cs []corev1.PodCondition, t corev1.PodConditionType, v corev1.ConditionStatus) []corev1.PodCondition {
	out := append([]corev1.PodCondition(nil), cs...)
	for i := range out {
		if out[i].Type == t {
			out[i].Status = v
		}
	}
	return out
}

func condition(cs []corev1.PodCondition, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range cs {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}
