package nodestatus

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func keeperFor(client *fake.Clientset) *keeper {
	return &keeper{client: client, o: Options{
		NodeName:       "w1",
		NodeIP:         "10.0.0.21",
		Labels:         map[string]string{"homelab.dev/pool": "a"},
		Taints:         []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}},
		LeaseDuration:  40e9,
		RuntimeVersion: func(context.Context) string { return "homelab-cri-standin://0.1" },
		Runtime: func() Runtime {
			return Runtime{LastSync: time.Now(), Answered: true, RuntimeReady: &RuntimeCondition{Type: "RuntimeReady", Status: true},
				NetworkReady: &RuntimeCondition{Type: "NetworkReady", Status: true}}
		},
		Machine: DetectMachine("/", 0),
		Logf:    func(string, ...any) {},
	}}
}

func TestRegisterStatusAndConflict(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	k := keeperFor(client)
	if err := k.register(ctx); err != nil {
		t.Fatal(err)
	}
	conflicts := 1
	client.PrependReactor("update", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" && conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "w1", nil)
		}
		return false, nil, nil
	})
	if err := k.updateStatus(ctx); err != nil {
		t.Fatalf("status update after a conflict: %v", err)
	}
	if conflicts != 0 {
		t.Fatal("conflict not exercised")
	}
	n, err := client.CoreV1().Nodes().Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels["kubernetes.io/hostname"] != "w1" || n.Labels["homelab.dev/pool"] != "a" || n.Labels["kubernetes.io/os"] != "linux" {
		t.Errorf("labels %v", n.Labels)
	}
	if len(n.Spec.Taints) != 1 {
		t.Errorf("taints %v", n.Spec.Taints)
	}
	if n.Status.Addresses[0] != (corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.21"}) {
		t.Errorf("addresses %v", n.Status.Addresses)
	}
	conds := map[corev1.NodeConditionType]corev1.ConditionStatus{}
	for _, c := range n.Status.Conditions {
		conds[c.Type] = c.Status
	}
	if conds[corev1.NodeReady] != corev1.ConditionTrue || conds[corev1.NodeMemoryPressure] != corev1.ConditionFalse ||
		conds[corev1.NodeDiskPressure] != corev1.ConditionFalse || conds[corev1.NodePIDPressure] != corev1.ConditionFalse {
		t.Errorf("conditions %v", conds)
	}
	if n.Status.NodeInfo.KubeletVersion != "v1.34.4" || n.Status.NodeInfo.ContainerRuntimeVersion != "homelab-cri-standin://0.1" {
		t.Errorf("node info %+v", n.Status.NodeInfo)
	}
	if n.Status.Capacity.Cpu().IsZero() || n.Status.Capacity.Memory().IsZero() || n.Status.Capacity.Pods().Value() != 110 {
		t.Errorf("capacity %v", n.Status.Capacity)
	}

	if err := k.renewLease(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *l.Spec.HolderIdentity != "w1" || *l.Spec.LeaseDurationSeconds != 40 || l.OwnerReferences[0].Name != "w1" {
		t.Errorf("lease %+v", l)
	}
}

func TestReRegisterAfterDelete(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	k := keeperFor(client)
	if err := k.register(ctx); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Nodes().Delete(ctx, "w1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := k.updateStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Nodes().Get(ctx, "w1", metav1.GetOptions{}); err != nil {
		t.Fatalf("not re-registered: %v", err)
	}
}

func TestTakeOverExistingNode(t *testing.T) {
	ctx := context.Background()
	existing := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1", Labels: map[string]string{"custom": "x"}}}
	client := fake.NewClientset(existing)
	k := keeperFor(client)
	if err := k.register(ctx); err != nil {
		t.Fatal(err)
	}
	n, _ := client.CoreV1().Nodes().Get(ctx, "w1", metav1.GetOptions{})
	// Default labels are fixed; --node-labels only apply at creation.
	if n.Labels["custom"] != "x" || n.Labels["kubernetes.io/hostname"] != "w1" || n.Labels["homelab.dev/pool"] != "" {
		t.Errorf("labels %v", n.Labels)
	}
}

// The flag names the variable the stand-in reports: a kubelet package's
// build links its version there.
func TestVersionFlag(t *testing.T) {
	if got, want := VersionFlag("v1.35.4"), "-X github.com/homelab-dev/homelab/infra/lab/standin/kubelet/nodestatus.KubeletVersion=v1.35.4"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
