package provider

import (
	"slices"
	"strings"
	"testing"

	"github.com/pulumi/pulumi-go-provider/infer"
)

const pulledOutput = `[config/images] Pulled registry.k8s.io/kube-apiserver:v1.34.4
[config/images] Pulled registry.k8s.io/etcd:3.6.5-0
`

func TestKubeadmImagesPullOnceAVersion(t *testing.T) {
	lab := newFakeLab(t)
	ctx := lab.ctx()
	n := lab.node("cp-2")
	n.onScript("kubeadm/images-pull", pulledOutput, 0)
	in := KubeadmImagesArgs{Connection: lab.conn("cp-2"), ConfigPath: "/etc/kubernetes/kubeadm/init.yaml", KubernetesVersion: "v1.34.4"}

	preview, err := (KubeadmImages{}).Create(ctx, infer.CreateRequest[KubeadmImagesArgs]{Inputs: in, DryRun: true})
	if err != nil || n.dials != 0 {
		t.Fatalf("a preview touched the node: %v, %v", err, n.events)
	}
	if preview.ID == "" {
		t.Error("a preview without an ID")
	}
	created, err := (KubeadmImages{}).Create(ctx, infer.CreateRequest[KubeadmImagesArgs]{Inputs: in})
	if err != nil {
		t.Fatal(err)
	}
	if n.ran("kubeadm/images-pull") != 1 || !n.asked("--config '/etc/kubernetes/kubeadm/init.yaml'") {
		t.Errorf("create did %v", n.mutations())
	}
	if want := []string{"registry.k8s.io/kube-apiserver:v1.34.4", "registry.k8s.io/etcd:3.6.5-0"}; !slices.Equal(created.Output.Pulled, want) {
		t.Errorf("pulled %v, want %v", created.Output.Pulled, want)
	}

	// A refresh and a no-op up ask the node nothing.
	n.reset()
	st := refresh(t, ctx, KubeadmImages{}, in, created.Output)
	if d := diffKeys(t, KubeadmImages{}, in, st); len(d) > 0 || n.dials != 0 {
		t.Errorf("unchanged: diff %v, %d dials", d, n.dials)
	}
	rekeyed := in
	rekeyed.Connection.PrivateKey = "key-2"
	rekeyed.IgnorePreflight = []string{"NumCPU"}
	if d := diffKeys(t, KubeadmImages{}, rekeyed, st); len(d) > 0 {
		t.Errorf("a new key or preflight exception alone pulls: %v", d)
	}

	// A new version pulls its images.
	next := in
	next.KubernetesVersion = "v1.35.4"
	if d := diffKeys(t, KubeadmImages{}, next, st); !slices.Equal(d, []string{"kubernetesVersion"}) {
		t.Errorf("a new version shows %v", d)
	}
	if _, err := (KubeadmImages{}).Update(ctx, infer.UpdateRequest[KubeadmImagesArgs, KubeadmImagesState]{Inputs: next, State: st}); err != nil {
		t.Fatal(err)
	}
	if n.ran("kubeadm/images-pull") != 1 {
		t.Errorf("the new version's update did %v", n.mutations())
	}
}

func TestKubeadmImagesLeftToKubeadmOrFailing(t *testing.T) {
	lab := newFakeLab(t)
	ctx := lab.ctx()
	n := lab.node("cp-1")
	n.onScript("kubeadm/images-pull", "failed to pull image registry.k8s.io/kube-apiserver:v1.34.4: connection refused\n", 1)
	in := KubeadmImagesArgs{Connection: lab.conn("cp-1"), ConfigPath: "/etc/kubernetes/kubeadm/init.yaml", KubernetesVersion: "v1.34.4"}

	// The registry refuses: the up stops on this node, saying why,
	// before its init or join.
	_, err := (KubeadmImages{}).Create(ctx, infer.CreateRequest[KubeadmImagesArgs]{Inputs: in})
	if err == nil || !strings.Contains(err.Error(), "cp-1") || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("a failed pull: %v", err)
	}

	// ImagePull ignored (any case, or all): kubeadm's preflight would not
	// pull, and neither does this.
	for _, ignore := range [][]string{{"imagepull"}, {"NumCPU", "all"}} {
		n.reset()
		left := in
		left.IgnorePreflight = ignore
		created, err := (KubeadmImages{}).Create(ctx, infer.CreateRequest[KubeadmImagesArgs]{Inputs: left})
		if err != nil || n.dials != 0 || len(created.Output.Pulled) != 0 {
			t.Errorf("ignoring %v: %v, %v, pulled %v", ignore, err, n.events, created.Output.Pulled)
		}
		// Taken back: pulled.
		if d := diffKeys(t, KubeadmImages{}, in, created.Output); !slices.Equal(d, []string{"ignorePreflight"}) {
			t.Errorf("no longer ignoring %v shows %v", ignore, d)
		}
	}
}
